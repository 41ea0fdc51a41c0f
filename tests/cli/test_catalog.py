"""The one recipe catalog: what the console offers and what ``sparktui overview`` lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.catalog import default_slug, load_catalog
from sparktui.cli import main
from tests.conftest import CLUSTER4, RECIPES


def test_catalog_opens_the_demo_by_default() -> None:
    infos = load_catalog([RECIPES], CLUSTER4)
    assert [i.slug for i in infos][:3] == ["demo-tp4", "demo-vllm-tp4", "dsv41-flash-4x-mia"]
    assert all(i.usable for i in infos)
    assert default_slug(infos, None) == "demo-tp4"
    assert default_slug(infos, "dsv41-flash-4x-mia") == "dsv41-flash-4x-mia"
    assert default_slug(infos, "gone") == "demo-tp4"


def test_catalog_keeps_broken_recipes_with_their_problems(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "recipe.toml").write_text('engine = "sglang"\nport = "x"\n')
    [info] = load_catalog([tmp_path], None)
    assert not info.usable and info.problems and info.text


def test_catalog_an_earlier_folder_hides_a_later_recipe_of_the_same_name(tmp_path: Path) -> None:
    (tmp_path / "demo-tp4").mkdir()
    (tmp_path / "demo-tp4" / "recipe.toml").write_text('engine = "sglang"\nport = "x"\n')
    infos = load_catalog([tmp_path, RECIPES], CLUSTER4)
    assert [i.slug for i in infos].count("demo-tp4") == 1
    assert next(i for i in infos if i.slug == "demo-tp4").folder == tmp_path


def overview(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["overview", *argv]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.out.splitlines()


def test_overview_lists_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    lines = overview(capsys, "--recipes", str(RECIPES), "--cluster", str(CLUSTER4))
    assert lines[0].startswith("sparktui ") and lines[0].endswith(f"· recipes from {RECIPES}")
    listed = [line for line in lines if line.startswith("  ")]
    assert len(listed) == len(load_catalog([RECIPES], CLUSTER4))
    assert listed[0] == ("  ✓ demo-tp4: Demo engine TP4 (sparktui demo engine, not a real model) · "
                         "sglang · 4 nodes on cluster 'sparks'")


def test_overview_counts_the_problems_of_a_broken_recipe(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "recipe.toml").write_text('engine = "sglang"\nport = "x"\n')
    [info] = load_catalog([tmp_path], None)
    lines = overview(capsys, "--recipes", str(tmp_path))
    assert f"  ✗ broken: {len(info.problems)} problem(s); run: sparktui validate broken" in lines


def test_overview_prints_a_title_with_markup_verbatim(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "odd").mkdir()
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    old = 'name = "Demo engine TP4 (sparktui demo engine, not a real model)"'
    assert old in text
    (tmp_path / "odd" / "recipe.toml").write_text(text.replace(old, 'name = "odd [/red] [b]title"'))
    lines = overview(capsys, "--recipes", str(tmp_path), "--cluster", str(CLUSTER4))
    assert any(line.startswith("  ✓ odd: odd [/red] [b]title · sglang") for line in lines), lines
