"""Quitting the console never stops the ranks; the next console reattaches to them."""

from __future__ import annotations

from collections.abc import Callable

from sparktui.ui.app import SparkApp
from sparktui.ui.logstore import TEXT
from tests.ui.conftest import wait_for

SIZE = (100, 30)


async def test_quit_keeps_ranks_and_the_next_start_reattaches(live_app: Callable[[], SparkApp]) -> None:
    first = live_app()
    async with first.run_test(size=SIZE) as pilot:
        main = first.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open")
        await pilot.press("u")
        await wait_for(pilot, lambda: [main.ranks_table.states.get(r) for r in range(4)] == ["ready"] * 4,
                       40, "every rank ready")
        assert main.session is not None
        containers = [info.container_id for info in main.session.orch.ranks]
        run_id = main.state.run_id
        await pilot.press("q")
    assert first.main_screen.session is None  # closed on quit, containers left alone

    second = live_app()
    async with second.run_test(size=SIZE) as pilot:
        main = second.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open again")
        session = main.session
        assert session is not None and session.attached
        assert [info.container_id for info in session.orch.ranks] == containers
        assert second.main_screen.state.run_id == run_id
        # the lines captured before quitting are back, from the run's files
        assert any("The server is fired up" in ln[TEXT] for ln in main.store.lines(0))
        await wait_for(pilot, lambda: [main.ranks_table.states.get(r) for r in range(4)] == ["ready"] * 4,
                       20, "every rank ready again")
        # uptime counts from the containers' start, not from the reattach
        await wait_for(pilot, lambda: all(main.ranks_table.values[r]["up"] != "-" for r in range(4)), 5,
                       "the uptimes")
        assert all(str(main.ranks_table.values[r]["up"]).endswith("s") for r in range(4))
        # and it follows them live again
        count = len(main.store.lines(0))
        await wait_for(pilot, lambda: len(main.store.lines(0)) > count, 10, "new lines of rank 0")
        await pilot.press("x")
        await pilot.pause(0.2)
        await pilot.press("y")
        await wait_for(pilot, lambda: all(main.ranks_table.states.get(r) == "stopped" for r in range(4)),
                       30, "every rank stopped")
        await pilot.press("q")
