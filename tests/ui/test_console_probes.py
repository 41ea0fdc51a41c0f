"""Health probes as the operator sees them, on real demo ranks (local cluster): once ready, at
most one probe per rank per 10 s in the engine's access log; the console hides those lines and
its count matches the run's files."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from sparktui.core.runstore import ts_epoch
from sparktui.ui.app import SparkApp
from sparktui.ui.logstore import NO, TEXT, is_probe_line
from sparktui.ui.widgets.log_bar import LogBar
from tests.ui.conftest import wait_for

SIZE = (120, 40)
WATCH_S = 25.0


async def test_ready_ranks_are_probed_every_10s_and_the_console_hides_those_lines(
        live_app: Callable[[], SparkApp]) -> None:
    app = live_app()
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open")
        table = main.ranks_table
        await pilot.press("u")
        await wait_for(pilot, lambda: [table.states.get(r) for r in range(4)] == ["ready"] * 4, 40,
                       "every rank ready")
        assert main.session is not None
        orch = main.session.orch
        run = orch.run
        assert run is not None
        await wait_for(pilot, lambda: all(i.health == 200 for i in orch.ranks), 15, "health 200")
        start = time.time()
        await pilot.pause(WATCH_S)
        end = time.time()

        # the engine's access log, as the run's files keep it: one probe per rank per 10 s
        lines = {r: list(run.log(r).read()) for r in range(4)}
        for rank, rank_lines in lines.items():
            stamps = [t for _, ts, text in rank_lines
                      if is_probe_line(text) and (t := ts_epoch(ts)) is not None and start <= t <= end]
            assert 2 <= len(stamps) <= 3, (rank, stamps)
            gaps = [b - a for a, b in itertools.pairwise(stamps)]
            assert all(gap >= 9.5 for gap in gaps), (rank, gaps)

        # the console hides them and counts what it hid: the probe lines of the shown windows
        logs = main.logs
        logs.model.set()  # the store took lines since the bar last painted
        bar = logs.query_one(LogBar)
        in_files = 0
        for rank in range(4):
            window = main.store.lines(rank)
            first, last = window[0][NO], window[-1][NO]
            in_files += sum(1 for no, _, text in run.log(rank).read()
                            if first <= no <= last and is_probe_line(text))
        assert bar.state.hidden == in_files > 8
        assert not any(is_probe_line(line[TEXT]) for line in logs.view.lines)

        # h shows them, h hides them again
        await pilot.press("h")
        assert not logs.model.hide_probes and bar.state.hidden == 0
        assert sum(1 for line in logs.view.lines if is_probe_line(line[TEXT])) >= in_files
        await pilot.press("h")
        assert logs.model.hide_probes
        assert not any(is_probe_line(line[TEXT]) for line in logs.view.lines)

        # down: no rank runs, none shows a health code
        await pilot.press("x")
        await pilot.pause(0.5)
        await pilot.press("y")
        await wait_for(pilot, lambda: all(table.states.get(r) == "stopped" for r in range(4)), 30,
                       "every rank stopped")
        assert [i.health for i in orch.ranks] == [None] * 4
        await pilot.press("q")
