"""The console shows a restart's wait: a local demo rank whose engine left a child process of
its own (in a session of its own, out of the rank's group) is restarted from the console; the
rank's detail says it is waiting, with the figures and the process left, until the test ends
that process; then the restart goes on."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.geometry import Region

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.restart_screen import RestartScreen
from sparktui.ui.widgets.rank_detail import RankDetail
from tests.backend.test_local_memwait import LEAVER, demo
from tests.ui.conftest import sparktui, wait_for

SLEEP = b"sleep\x00478\x00"


def kill_sleeps() -> None:
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == SLEEP:
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue


@pytest.fixture
def recipes(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "recipes"
    folder.mkdir()
    demo(folder / "demo-memwait", entry=["python3", "-c", LEAVER.format(secs=478)])
    yield folder
    sparktui("down", str(folder / "demo-memwait"))
    kill_sleeps()


async def test_the_rank_detail_shows_the_wait_for_the_old_process(recipes: Path) -> None:
    app = SparkApp(ConsoleOptions([recipes], None, state_root=state_dir(), recipe="demo-memwait",
                                  remember=False, cursor_blink=False))
    async with app.run_test(size=(160, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
        await pilot.press("u")
        await wait_for(pilot, lambda: all(main.state.ranks.get(r) is not None
                                          and main.state.ranks[r].state == "ready"
                                          for r in range(4)), 40, "every rank ready")
        assert main.session is not None
        orch = main.session.orch
        await pilot.press("2")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartScreen), 5, "restart dialog")
        await pilot.press("r")  # this rank only
        await wait_for(pilot, lambda: "1 old process left" in main.state.ranks[1].detail, 20,
                       "the wait on rank 1's detail")
        snap = main.state.ranks[1]
        assert snap.state == "restarting"
        assert snap.detail.startswith("waiting for memory: local1: ")
        assert "GiB available, back to " in snap.detail  # its memory is back: only the process
        detail = main.query_one(RankDetail)
        await wait_for(pilot, lambda: "waiting for memory: " in "".join(
            s.text for s in detail.render_lines(Region(0, 0, *detail.size))), 5, "the rank detail")
        assert any(n.text.startswith("the restart waits for memory to come back and the old "
                                     "processes to go: local1: ") for n in main.state.notices)
        assert orch.run is not None
        [start] = [e for e in orch.run.events() if e["kind"] == "memory-wait"]
        [pid] = start["nodes"][0]["left"]
        assert Path(f"/proc/{pid}/cmdline").read_bytes() == SLEEP
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: any(n.text.startswith("memory back after ")
                                          for n in main.state.notices), 10, "the wait's end")
        await wait_for(pilot, lambda: main.busy is None, 30, "restart to finish")
        assert orch.ranks[1].restarts == 1
        assert "waiting for memory" not in main.state.ranks[1].detail
        await pilot.press("q")
