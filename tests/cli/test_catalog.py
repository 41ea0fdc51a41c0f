"""The one recipe catalog: what the console offers and what ``sparktui overview`` lists."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sparktui.catalog import default_slug, load_catalog
from sparktui.cli import main
from sparktui.config import shipped as shipped_folder
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
    demo = next(i for i in infos if i.slug == "demo-tp4")
    assert demo.folder == tmp_path and demo.hides == (RECIPES / "demo-tp4" / "recipe.toml",)
    assert demo.hides_text().startswith("hides the shipped demo-tp4 (")
    assert not any(i.hides for i in infos if i.slug != "demo-tp4")


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
    first = info.problems[0]
    assert (f"  ✗ broken: {len(info.problems)} problem(s); run: sparktui validate broken; the "
            f"first: {first.location()}: {first.message}") in lines


def test_overview_lists_a_recipe_that_is_not_utf8_with_its_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Latin-1 file is one entry with its sentence, not a crash of the whole list."""
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "recipe.toml").write_bytes(b'engine = "sglang"\nname = "caf\xe9"\n')
    shutil.copytree(RECIPES / "demo-tp4", tmp_path / "demo-tp4")
    lines = overview(capsys, "--recipes", str(tmp_path), "--cluster", str(CLUSTER4))
    where = tmp_path / "latin" / "recipe.toml"
    assert f"  ✗ latin: {where}:2: not UTF-8 text (byte 29)" in lines, lines
    assert any(line.startswith("  ✓ demo-tp4: ") for line in lines), lines
    [info] = [i for i in load_catalog([tmp_path], CLUSTER4) if i.slug == "latin"]
    assert "caf\ufffd" in info.text  # shown with the bad byte replaced, where it stands


def test_overview_says_when_a_recipe_hides_a_shipped_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``./recipes/demo-tp4`` comes first and hides the shipped demo-tp4: overview says so."""
    shutil.copytree(RECIPES / "demo-tp4", tmp_path / "recipes" / "demo-tp4")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPARKTUI_RECIPES", raising=False)
    lines = overview(capsys, "--cluster", str(CLUSTER4))
    [demo] = [line for line in lines if line.startswith("  ✓ demo-tp4: ")]
    shipped = shipped_folder("recipes") / "demo-tp4" / "recipe.toml"
    assert demo.endswith(f" · hides the shipped demo-tp4 ({shipped})"), demo
    others = [line for line in lines if line.startswith("  ✓ ") and line != demo]
    assert others and not any("hides" in line for line in others), lines


def test_overview_prints_a_title_with_markup_verbatim(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "odd").mkdir()
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    old = 'name = "Demo engine TP4 (sparktui demo engine, not a real model)"'
    assert old in text
    (tmp_path / "odd" / "recipe.toml").write_text(text.replace(old, 'name = "odd [/red] [b]title"'))
    lines = overview(capsys, "--recipes", str(tmp_path), "--cluster", str(CLUSTER4))
    assert any(line.startswith("  ✓ odd: odd [/red] [b]title · sglang") for line in lines), lines


ACTION_NAME = "[@click=app.screenshot('victim.txt','..')]shared-demo"


def test_a_recipe_whose_name_is_unsafe_is_listed_as_unusable(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A folder named with action markup or an escape: unusable, the sentence quoting it
    written out; the catalog never picks it to open (issue 23)."""
    for name in (ACTION_NAME, "a\x1b]0;t\x07b\u202e"):
        shutil.copytree(RECIPES / "demo-tp4", tmp_path / name)
    infos = load_catalog([tmp_path], CLUSTER4)
    assert [i.name_ok for i in infos] == [False, False] and not any(i.usable for i in infos)
    assert default_slug(infos, ACTION_NAME) is None
    lines = overview(capsys, "--recipes", str(tmp_path), "--cluster", str(CLUSTER4))
    listed = [line for line in lines if line.startswith("  ")]
    assert listed[0].startswith(f'  ✗ not a usable recipe name: "{ACTION_NAME}" (a recipe'), listed
    assert listed[1].startswith('  ✗ not a usable recipe name: "a\\x1b]0;t\\x07b\\u202e" ('), listed
