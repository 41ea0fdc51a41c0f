"""The console drives real demo ranks on the local cluster: up, logs, checks, grep, restart, down."""

from __future__ import annotations

import socket
from collections.abc import Callable

from sparktui.ui.app import SparkApp
from sparktui.ui.formatting import checks_text
from sparktui.ui.logstore import RANK, TEXT
from sparktui.ui.screens.add_check_screen import AddCheckScreen
from sparktui.ui.screens.confirm_screen import ConfirmScreen
from sparktui.ui.screens.restart_screen import RestartScreen
from tests.ui.conftest import wait_for

SIZE = (120, 40)


async def test_up_grep_add_check_restart_down(live_app: Callable[[], SparkApp]) -> None:
    app = live_app()
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open")
        assert main.session is not None and main.session.slug == "demo-tp4"
        table = main.ranks_table

        # u: every rank comes up; the state text comes from the Orchestrator's events
        await pilot.press("u")
        await wait_for(pilot, lambda: [table.states.get(r) for r in range(4)] == ["ready"] * 4, 40,
                       "every rank ready")
        orch = main.session.orch

        # every rank's log is on screen, in the merged view with rank prefixes
        await wait_for(pilot, lambda: all(main.store.lines(r) for r in range(4)), 10, "logs")
        shown = {line[RANK] for line in main.logs.view.lines}
        assert shown == {0, 1, 2, 3}
        assert any("The server is fired up" in line[TEXT] for line in main.store.lines(0))

        # g: side by side, a pane per rank, each live; g again: the merged view
        await pilot.press("g")
        await wait_for(pilot, lambda: main.logs.model.grid and len(main.logs.panes.views) == 4, 5, "4 panes")
        panes = main.logs.panes.views
        assert [{ln[RANK] for ln in pane.lines} for pane in panes] == [{0}, {1}, {2}, {3}]
        counts = [len(pane.lines) for pane in panes]
        await wait_for(pilot, lambda: all(len(p.lines) > c for p, c in zip(panes, counts, strict=True)),
                       10, "new lines in every pane")
        await pilot.press("g")
        assert not main.logs.model.grid and {line[RANK] for line in main.logs.view.lines} == {0, 1, 2, 3}

        # boot checks: every check passed on every rank
        await wait_for(pilot, lambda: all(orch.checks.rank_summary(r)["pending"] == 0 for r in range(4)),
                       10, "checks settled")
        for r in range(4):
            summary = orch.checks.rank_summary(r)
            assert summary["failed"] == 0 and summary["passed"] > 0, summary
            assert checks_text(table.checks[r])[1] == "ready"

        # / regex: hides the rest, counts matches; bad regex shows an error and no crash
        await pilot.press("slash")
        await pilot.press(*"rendezvous ok: world=4")
        await wait_for(pilot, lambda: main.logs.model.matches == 4, 5, "4 grep matches")
        assert len(main.logs.view.lines) == 4
        assert all("rendezvous ok" in line[TEXT] for line in main.logs.view.lines)
        await pilot.press("enter")
        await pilot.press("n", "n")
        assert main.logs.view.cursor == 1
        await pilot.press("N")
        assert main.logs.view.cursor == 0
        main.logs.apply_grep_now("![")
        await pilot.pause(0.1)
        assert main.logs.model.pending_filter.error is not None
        main.logs.apply_grep_now("!tick")
        await pilot.pause(0.1)
        assert main.logs.view.lines and all("tick" not in ln[TEXT] for ln in main.logs.view.lines)
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert not main.logs.model.line_filter.active and main.logs.model.matches is None

        # + adds a check that passes on lines captured before it existed
        await pilot.press("plus")
        await wait_for(pilot, lambda: isinstance(app.screen, AddCheckScreen), 5, "add check dialog")
        await pilot.press(*"DEMO rendezvous: rank 0 listening on port ...")
        await pilot.press("enter")
        def added_passed() -> bool:
            added = [c for c in orch.checks.checks if c.added]
            return bool(added) and orch.checks.overall(added[0]) == "passed"

        await wait_for(pilot, added_passed, 10, "the added check to pass")
        added = next(c for c in orch.checks.checks if c.added)
        match = orch.checks.status[(added.id, 0)].match
        assert match is not None and match.line_no < 20  # found among the lines of the boot
        assert main.checks_panel.display
        await wait_for(pilot, lambda: any(n.text.startswith("check added: ") for n in main.state.notices),
                       5, "the added check's notice")
        assert [n.text for n in main.state.notices if n.text.startswith("check added: ")] == [
            "check added: 'DEMO rendezvous: rank 0 listening on port ...': passed (seen on rank 0)"]

        # r on rank 1, confirmed "rank only": only rank 1 gets a new container
        before = {info.rank: info.container_id for info in orch.ranks}
        await pilot.press("2")
        assert table.selected_rank == 1 and main.logs.model.shown == 1
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartScreen), 5, "restart dialog")
        assert "TP4 group" in str(app.screen.query_one("#explain").render())
        await pilot.press("r")
        await wait_for(pilot, lambda: orch.ranks[1].container_id not in (None, before[1]), 30,
                       "rank 1 replaced")
        await wait_for(pilot, lambda: main.busy is None, 30, "restart to finish")
        assert orch.ranks[1].restarts == 1
        for r in (0, 2, 3):
            assert orch.ranks[r].container_id == before[r], f"rank {r} was replaced"
        await wait_for(pilot, lambda: any("restarted by the operator" in ln[TEXT]
                                          for ln in main.store.lines(1)), 10, "restart marker")

        # x: down, confirmed; every rank stopped
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "down dialog")
        await pilot.press("y")
        await wait_for(pilot, lambda: all(table.states.get(r) == "stopped" for r in range(4)), 30,
                       "every rank stopped")
        await pilot.press("q")


async def test_u_with_a_port_taken_says_which_and_starts_nothing(live_app: Callable[[], SparkApp]) -> None:
    """Something listens on rank 2's API port (local2: 30000 + its offset of 2): ``u`` says
    which node, port and rank, and no rank starts."""
    app = live_app()
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 30002))
        taken.listen()
        async with app.run_test(size=SIZE) as pilot:
            main = app.main_screen
            await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open")
            await pilot.press("u")
            await wait_for(pilot, lambda: any(n.level == "error" and n.text.startswith("up: ")
                                              for n in main.state.notices), 20, "up's answer")
            [said] = [n.text for n in main.state.notices if n.text.startswith("up: ")]
            assert said.startswith("up: local2: port 30002 (rank 2's API port) is already in use; "
                                   "nothing was started"), said
            assert all(main.ranks_table.states.get(r) in (None, "pending") for r in range(4))
            await pilot.press("q")
