"""What sparktui writes under its state and config folders is its user's alone (folders 0700,
files 0600) under the usual umask 022, and what an older sparktui left open is tightened once,
with one line on stderr."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.core.cluster import local_cluster
from sparktui.core.ownership import Adoptions
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from sparktui.core.runstore import RunStore
from sparktui.core.secrets import plan_key
from sparktui.ui.settings import save_state
from tests.conftest import RECIPES


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_every_state_writer_creates_private_files(tmp_path: Path, umask_022: None) -> None:
    root = tmp_path / "state" / "sparktui"
    run = RunStore(root).create("demo-tp4")
    run.write_plan(build_plan(load_recipe(RECIPES / "demo-tp4" / "recipe.toml"), local_cluster(4)))
    run.log(0).append([("2026-01-01T00:00:00Z", "a line")])
    run.event("up", ranks=[0])
    assert run.try_lock()
    run.set_cursor(0, "local-1", "10", save=True)
    run.unlock()
    Adoptions(root).add("c1", "alice", "bob")
    plan_key(root, "local")
    save_state({"theme": "x"}, tmp_path / "config" / "sparktui")
    made = [p for p in tmp_path.rglob("*")]
    assert {p.name for p in made} >= {"runs", "plan.json", "r0.log", "events.jsonl",
                                      "cursors.json", "follow.lock", "adopted.json", "keys",
                                      "local.key", "state.json"}
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in made} == {
        str(p.relative_to(tmp_path)): oct(0o700 if p.is_dir() else 0o600) for p in made}


def test_an_older_state_folder_is_tightened_once_with_a_notice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(os.environ["XDG_STATE_HOME"]) / "sparktui"
    run = root / "runs" / "demo-tp4-20260101-000000"
    run.mkdir(parents=True)
    (run / "r0.log").write_text("x\tsk-old-secret\n")
    for folder in (root, root / "runs", run):
        os.chmod(folder, 0o755)
    os.chmod(run / "r0.log", 0o644)
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "sparktui"
    config.mkdir(parents=True)
    (config / "state.json").write_text("{}")
    os.chmod(config / "state.json", 0o644)

    assert main(["validate", str(RECIPES / "demo-tp4")]) == 0
    err = capsys.readouterr().err
    assert f"sparktui: made 3 folder(s) and 2 file(s) under {root} private to you" in err
    assert [mode(p) for p in (root, root / "runs", run, run / "r0.log", config / "state.json")] \
        == [0o700, 0o700, 0o700, 0o600, 0o600]
    os.chmod(run / "r0.log", 0o644)  # once: a later start does not walk the folder again
    assert main(["validate", str(RECIPES / "demo-tp4")]) == 0
    assert "private to you" not in capsys.readouterr().err
