"""The console's grep searches the whole run, not only the lines it holds in memory: a line that
left the window long ago is found in the run's files (through ``Orchestrator.grep_history``),
and the count is every match the run holds. Real demo ranks on the local cluster; the run's
files get a long history before the console opens, as a run that went on for days has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.config import state_dir
from sparktui.core.runstore import RankLog, RunStore
from sparktui.ui.app import SparkApp
from sparktui.ui.logstore import NO, RANK, TEXT
from sparktui.ui.options import ConsoleOptions
from tests.conftest import RECIPES, ROOT
from tests.ui.conftest import DEMO, wait_for

HISTORY = 3000  # lines per rank before what the demo wrote
WINDOW = 50
NEEDLE = "needle only in the history of rank 2"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparktui", *args], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def long_run() -> Iterator[Path]:
    """demo-tp4 up, its run's files holding ``HISTORY`` older lines per rank in front (the
    saved cursors moved along, so the follower reads on where it was)."""
    up = cli("up", DEMO, "--wait")
    assert up.returncode == 0, up.stderr
    try:
        run = RunStore(state_dir()).latest(DEMO)
        assert run is not None
        cursors = json.loads((run.dir / "cursors.json").read_text())
        for rank in range(4):
            rows = [f"2020-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.{rank:03d}000Z\t"
                    f"{NEEDLE if (rank, i) == (2, 1234) else 'old line'} {i}"
                    f"{' zqmarker' if i % 100 == 0 else ''}\n" for i in range(HISTORY)]
            history = "".join(rows).encode()
            path = run.log(rank).path
            path.write_bytes(history + path.read_bytes())
            cursors[str(rank)]["lines"] += HISTORY
            cursors[str(rank)]["bytes"] += len(history)
        (run.dir / "cursors.json").write_text(json.dumps(cursors))
        yield run.dir
    finally:
        cli("down", DEMO)


async def test_a_match_only_in_the_history_is_found_and_counted(long_run: Path) -> None:
    app = SparkApp(ConsoleOptions([RECIPES], None, state_root=state_dir(), recipe=DEMO, window=WINDOW))
    async with app.run_test(size=(120, 30)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 20, "the demo recipe to open")
        logs, store = main.logs, main.store
        await wait_for(pilot, lambda: len(store.lines(2)) == WINDOW, 20, "rank 2's window")
        assert not store.complete(2) and not any(NEEDLE in line[TEXT] for line in store.lines(2))

        await pilot.press("slash", *"needle only", "enter")
        await wait_for(pilot, lambda: logs.model.line_filter.text == "needle only" and not logs.model.scanning,
                       20, "the grep over the run's files")
        assert logs.model.matches == 1
        assert [(line[RANK], line[NO], line[TEXT]) for line in logs.view.lines] == [(2, 1235, f"{NEEDLE} 1234")]

        logs.apply_grep_now("zqmarker")  # 30 per rank, every one outside the window
        await wait_for(pilot, lambda: not logs.model.scanning, 20, "the second scan")
        assert logs.model.matches == 4 * HISTORY // 100
        assert len(logs.view.lines) == WINDOW  # the newest window of matches is held
        assert logs.view.lines == sorted(logs.view.lines)  # capture order across the ranks
        bar = str(logs.query_one("#log-bar").render())
        assert "120 matches" in bar, bar

        before = written(long_run)
        logs.apply_grep_now("!old line")  # inverted: every line the demo wrote, and the needle
        await wait_for(pilot, lambda: not logs.model.scanning, 20, "the inverted scan")
        assert logs.model.matches is not None and before + 1 <= logs.model.matches <= written(long_run) + 1
        await pilot.press("q")


def written(run_dir: Path) -> int:
    """Lines the demo ranks wrote so far (it goes on writing: health probes' access lines)."""
    return sum(1 for rank in range(4) for _ in RankLog(run_dir / f"r{rank}.log").read()) - 4 * HISTORY


async def test_opening_the_grep_starts_its_scanners_and_closing_it_ends_them(
        long_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/`` starts the scanner processes a grep over this run will use (here every run counts
    as big enough for processes), so the pattern typed meanwhile does not wait for them to
    start; the scan takes them, and escape ends the ones started for the next pattern."""
    from sparktui.backend import history
    from tests.backend.test_grep_history import scanner_children, scanners_once

    monkeypatch.setattr(history, "PROCESS_BYTES", 0)
    app = SparkApp(ConsoleOptions([RECIPES], None, state_root=state_dir(), recipe=DEMO, window=WINDOW))
    async with app.run_test(size=(120, 30)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 20, "the demo recipe to open")
        logs = main.logs
        await wait_for(pilot, lambda: logs.model.run is not None, 20, "the run")
        assert scanner_children() == []
        await pilot.press("slash")
        ahead = {p.name for p in scanners_once(min(len(os.sched_getaffinity(0)), 4))}
        assert len(ahead) == min(len(os.sched_getaffinity(0)), 4) >= 1
        await pilot.press(*"needle only", "enter")
        await wait_for(pilot, lambda: logs.model.line_filter.text == "needle only" and not logs.model.scanning,
                       20, "the grep over the run's files")
        assert logs.model.matches == 1
        ready = {p.name for p in scanners_once(len(ahead))}  # made again for the next pattern
        assert len(ready) == len(ahead) and not ready & ahead
        await pilot.press("slash", "escape")
        await wait_for(pilot, lambda: scanner_children() == [], 10, "the scanners to end")
        await pilot.press("q")
