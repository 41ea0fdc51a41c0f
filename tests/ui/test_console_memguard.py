"""The console follows a launch the memory guard stops (the local cluster, a real demo rank):
the stop is in its notices with the figures, the rank's row says failed, its detail the cause.
``stop_at`` is this machine's total memory, which available memory is always under: the guard
stops at its first reading, whatever the other test lanes do to MemAvailable meanwhile (the
stop at a crossing, with a rank taking memory, is the backend test's)."""

from __future__ import annotations

from pathlib import Path

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.backend.test_local_memguard import FLOOR_ABOVE, demo_pids, mem_total, recipe
from tests.ui.conftest import sparktui, wait_for


async def test_the_console_shows_the_guard_stopping_a_launch(tmp_path: Path) -> None:
    folder = tmp_path / "recipes"
    folder.mkdir()
    stop_at = mem_total()
    recipe(folder / "demo-mem", stop_at + FLOOR_ABOVE, stop_at)
    app = SparkApp(ConsoleOptions([folder], None, state_root=state_dir(), recipe="demo-mem",
                                  remember=False))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            main = app.main_screen
            await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
            await pilot.press("u")
            await wait_for(pilot, lambda: main.ranks_table.states.get(0) == "failed", 60,
                           "the guard to stop rank 0")
            assert main.session is not None
            cause = main.session.orch.ranks[0].cause
            assert cause is not None and cause.code == "memory"
            assert cause.sentence.startswith("memory: ") and " left on local0" in cause.sentence
            texts = [n.text for n in main.state.notices]
            stop = [t for t in texts if "stopped before the host wedges" in t]
            assert len(stop) == 1 and stop[0].startswith(cause.sentence), texts
            assert "under stop_at " in stop[0]
            await wait_for(pilot, lambda: not demo_pids(), 15, "the rank's process to go")
    finally:
        sparktui("down", str(folder / "demo-mem"))
