"""s stages the recipe's data on every node, with one progress bar per node (local cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Label, ProgressBar

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.widgets.one_line import OneLine
from tests.conftest import SEED
from tests.ui.conftest import wait_for


@pytest.fixture
def staged_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    from tests.staging.ckpt import make_checkpoint

    ckpt = make_checkpoint(tmp_path / "hf")
    monkeypatch.setenv("HF_HOME", str(ckpt.hf))
    dst = tmp_path / "mia-state" / "engram"
    recipes = tmp_path / "recipes"
    folder = recipes / "dsv41-flash-4x-mia"
    folder.mkdir(parents=True)
    text = SEED.read_text().replace('dst = "/home/kilork/mia-state/engram"', f'dst = "{dst}"')
    (folder / "recipe.toml").write_text(text)
    return recipes, dst


async def test_stage_shows_progress_per_node(staged_recipe: tuple[Path, Path]) -> None:
    recipes, dst = staged_recipe
    app = SparkApp(ConsoleOptions([recipes], None, state_root=state_dir(), recipe="dsv41-flash-4x-mia"))
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
        assert main.staging.display
        assert main.staging.nodes == ["local0", "local1", "local2", "local3"]
        # nothing runs before s: no phase, no bar pulsing as if it did, the key that starts it
        row = main.staging.query_one("#stage-local0")
        assert str(row.query_one(".phase", Label).render()) == "-"
        assert not row.query_one(ProgressBar).display
        assert row.query_one(".info", OneLine).text == "s stages and verifies"
        await pilot.press("s")
        await wait_for(pilot, lambda: len(main.staging.last) == 4 and
                       all(p.phase == "done" for p in main.staging.last.values()), 60, "staging done")
        assert main.busy is None or main.busy == "stage"
        await wait_for(pilot, lambda: main.busy is None, 10, "the stage action to end")
        for rank in range(4):
            assert "100%" in str(main.ranks_table.values[rank]["staging"])
        assert row.query_one(ProgressBar).display
        assert sorted(p.name for p in dst.glob("engram-*.bin"))[:2] == ["engram-l1-r0of4.bin",
                                                                          "engram-l1-r1of4.bin"]
        assert not [ev for ev in main.state.notices if ev.level == "error"], main.state.notices
        await pilot.press("q")


async def test_a_failed_stage_shows_why_and_no_bar_at_work(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """No checkpoint on the nodes: every row says failed and why, and no bar pulses beside it
    as if staging went on."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    recipes = tmp_path / "recipes"
    (recipes / "dsv41-flash-4x-mia").mkdir(parents=True)
    (recipes / "dsv41-flash-4x-mia" / "recipe.toml").write_text(SEED.read_text().replace(
        'dst = "/home/kilork/mia-state/engram"', f'dst = "{tmp_path / "engram"}"'))
    app = SparkApp(ConsoleOptions([recipes], None, state_root=state_dir(), recipe="dsv41-flash-4x-mia"))
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
        await pilot.press("s")
        await wait_for(pilot, lambda: len(main.staging.last) == 4 and
                       all(p.phase == "failed" for p in main.staging.last.values()), 60, "staging failed")
        for node in main.staging.nodes:
            row = main.staging.query_one(f"#stage-{node}")
            assert not row.query_one(ProgressBar).display
            info = row.query_one(".info", OneLine)
            said = str(info.render())  # what the row shows: one line, both ends of the sentence
            assert said.startswith("checkpoint folder ") and said.endswith(" does not exist"), said
            assert "…" in said and len(said) == info.content_size.width
        await wait_for(pilot, lambda: main.busy is None, 10, "the stage action to end")
        errors = [n.text for n in main.state.notices if n.level == "error"]
        assert sorted(errors) == sorted(p.error or "" for p in main.staging.last.values())
        assert len(errors) == 4, errors  # once each, not once per reporter
        await pilot.press("q")
