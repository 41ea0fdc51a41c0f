"""Console tests: the real app, driven by Textual's Pilot.

Live tests run the demo recipe on the LOCAL cluster (real rank processes, no mocks) with the
state and config folders in tmp (the suite's autouse fixture); every live test ends with a
``down`` so no demo process outlives it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.main_screen import MainScreen
from tests.conftest import CLUSTER4, RECIPES, ROOT
from tests.runner import sparktui_run

DEMO = "demo-tp4"
FIXED_CLOCK = 1_000.0


async def wait_for(pilot: Pilot[None], what: Callable[[], bool], timeout: float = 30.0,
                   why: str = "") -> None:
    """Poll (with the app running) until ``what()`` holds; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not what():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {why or what}")
        await pilot.pause(0.1)


def sparktui(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``sparktui *args`` in a new process with this test's state folder (the suite's autouse
    fixture puts it in the environment, where the app under test reads it); never a traceback."""
    return sparktui_run(dict(os.environ), timeout)(*args)


def main_screen(app: SparkApp) -> MainScreen:
    return app.main_screen


@pytest.fixture
def recipes_copy(tmp_path: Path) -> Path:
    """The shipped recipes the snapshots show, in a folder of their own (a recipe added to the
    project later does not change the pictures)."""
    folder = tmp_path / "recipes"
    for name in (DEMO, "dsv41-flash-4x-mia"):
        shutil.copytree(RECIPES / name, folder / name)
    return folder


@pytest.fixture
def offline_app(recipes_copy: Path) -> Callable[..., SparkApp]:
    """The console on the 4-node test cluster file without touching it: no connection, a fixed
    clock, no cursor blink, no state file. Messages are fed as the Orchestrator would."""

    def make(theme: str = "sparktui-dark", recipe: str = DEMO) -> SparkApp:
        options = ConsoleOptions([recipes_copy], CLUSTER4, state_root=state_dir(), live=False,
                                 clock=lambda: FIXED_CLOCK, wall_clock=lambda: FIXED_CLOCK,
                                 cursor_blink=False, recipe=recipe, remember=False)
        return SparkApp(options, theme=theme)

    return make


def _down() -> None:
    env = {**os.environ}
    subprocess.run([sys.executable, "-m", "sparktui", "down", DEMO], cwd=ROOT, env=env,
                   capture_output=True, text=True, timeout=60)


@pytest.fixture
def live_app() -> Iterator[Callable[[], SparkApp]]:
    """The console on the local cluster with the shipped demo recipe; ``down`` afterwards."""

    def make() -> SparkApp:
        options = ConsoleOptions([RECIPES], None, state_root=state_dir(), recipe=DEMO)
        return SparkApp(options)

    yield make
    _down()


SNAPSHOT_VERSIONS = Path(__file__).parent / "snapshot-versions.json"  # not in __snapshots__: syrupy would call it unused
RENDERING_PACKAGES = ("textual", "rich", "pygments")


def rendering_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in RENDERING_PACKAGES}


@pytest.fixture
def same_renderer(request: pytest.FixtureRequest) -> None:
    """Snapshots are pictures of what Textual, Rich and Pygments render: made with other
    versions they differ without anything being wrong. Skip then (say why); --snapshot-update
    records the versions the new pictures were made with."""
    import json

    current = rendering_versions()
    if request.config.getoption("--snapshot-update", default=False):
        SNAPSHOT_VERSIONS.parent.mkdir(exist_ok=True)
        SNAPSHOT_VERSIONS.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
        return
    try:
        recorded = json.loads(SNAPSHOT_VERSIONS.read_text())
    except (OSError, ValueError):
        recorded = {}
    if recorded != current:
        pytest.skip(f"snapshots were made with {recorded}, this is {current}: "
                    "look at them with --snapshot-update and keep them if they are right")
