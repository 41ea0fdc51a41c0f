"""A rank that prints sparktui's restart marker itself, on the local cluster: the marker's text
is a line like any other. ``sparktui status`` (a process of its own, replaying the run's files
and events) counts no restart and keeps every check's verdict, before and after a real restart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.core.runstore import MARKER
from tests.conftest import RECIPES
from tests.runner import Cli, local_cli

FAKE = f"{MARKER}rank 0 restarted by the operator (container 0123456789ab replaced) ---"
# The demo engine, with a thread printing the marker once the rank has booted (after its boot
# lines, so a replay that took the text for a restart would judge the checks on what follows).
WRAPPER = ("import runpy, sys, threading; "
           f"t = threading.Timer(4.0, lambda: print({FAKE!r}, flush=True)); t.daemon = True; "
           "t.start(); runpy.run_module('sparktui.demo.engine', run_name='__main__')")


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    folder = tmp_path / "demo-marker"
    folder.mkdir()
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    entry = 'entrypoint = ["python3", "-m", "sparktui.demo.engine"]'
    assert entry in text
    (folder / "recipe.toml").write_text(text.replace(entry, f"entrypoint = {json.dumps(['python3', '-c', WRAPPER])}"))
    return folder


@pytest.fixture
def cli(tmp_path: Path, recipe: Path) -> Iterator[Cli]:
    yield from local_cli(tmp_path, recipe)


def status(cli: Cli, recipe: Path) -> list[dict[str, object]]:
    res = cli("status", str(recipe), "--json")
    assert res.returncode == 0, res.stderr
    ranks: list[dict[str, object]] = json.loads(res.stdout)["ranks"]
    return ranks


def checks_all_passed(ranks: list[dict[str, object]]) -> None:
    for r in ranks:
        checks = r["checks"]
        assert isinstance(checks, dict)
        assert checks["failed"] == 0 and checks["pending"] == 0, r


def marker_lines(cli: Cli, recipe: Path, want: int) -> int:
    """Rank 0's lines holding the marker's text, once there are ``want`` of them (20 s at most)."""
    deadline = time.monotonic() + 20
    while True:
        res = cli("logs", str(recipe), "--rank", "0", "--grep", "sparktui: rank 0 restarted")
        found = res.stdout.count("sparktui: rank 0 restarted")
        if found >= want or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_a_rank_printing_the_restart_marker_changes_no_count(cli: Cli, recipe: Path) -> None:
    up = cli("up", str(recipe), "--wait")
    assert up.returncode == 0, up.stderr
    assert marker_lines(cli, recipe, 1) == 1  # printed by the container, after its boot
    ranks = status(cli, recipe)
    assert [r["restarts"] for r in ranks] == [0, 0, 0, 0]
    checks_all_passed(ranks)
    restart = cli("restart", str(recipe), "--group", "--wait")
    assert restart.returncode == 0, restart.stderr
    # the fake, sparktui's own marker of the group restart, the new container's fake
    assert marker_lines(cli, recipe, 3) == 3
    ranks = status(cli, recipe)
    assert [r["restarts"] for r in ranks] == [1, 1, 1, 1]
    checks_all_passed(ranks)
