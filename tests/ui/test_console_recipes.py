"""The console's recipe list and pane on a recipes folder an operator may really have: secret
values masked in the source as the plan masks them, a file that is not UTF-8 listed with its
error (the console still opens), and a copy of a shipped recipe that hides it said to do so."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from textual.geometry import Region
from textual.widgets import Static

from sparktui.config import shipped
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.widgets.recipe_list import RecipeList
from tests.conftest import CLUSTER4, RECIPES
from tests.ui.conftest import wait_for

SIZE = (200, 60)
TOKEN = "hf_abcdefgh123"
API_KEY = "sk-12345678"


def shown(app: SparkApp, part: str) -> list[str]:
    """The lines a part of the recipe pane shows on screen (as the terminal gets them)."""
    static = app.main_screen.query_one(f"#recipe-{part}", Static)
    return [s.text.rstrip() for s in static.render_lines(Region(0, 0, *static.size))]


def recipes(tmp_path: Path) -> Path:
    folder = tmp_path / "recipes"
    shutil.copytree(RECIPES / "demo-tp4", folder / "demo-tp4")  # hides the shipped one
    shutil.copytree(RECIPES / "demo-tp4", folder / "demo-secret")
    path = folder / "demo-secret" / "recipe.toml"
    text = path.read_text()
    text = text.replace('SPARKTUI_DEMO_TICK = "1"\n',
                        f'SPARKTUI_DEMO_TICK = "1"\n# was {TOKEN}\nHF_TOKEN = "{TOKEN}"\n')
    text = text.replace('    "--trust-remote-code",\n',
                        f'    "--trust-remote-code",\n    "--api-key", "{API_KEY}",\n')
    path.write_text(text)
    (folder / "latin").mkdir()
    (folder / "latin" / "recipe.toml").write_bytes(b'engine = "sglang"\nname = "caf\xe9"\n')
    return folder


async def test_recipe_pane_masks_secrets_and_the_list_survives_bad_files(tmp_path: Path) -> None:
    options = ConsoleOptions([recipes(tmp_path), shipped("recipes")], CLUSTER4, live=False,
                             recipe="demo-secret", remember=False, cursor_blink=False)
    app = SparkApp(options)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the console to open")
        listed = {o.id: str(o.prompt) for o in main.query_one(RecipeList).options}
        assert listed["latin"].startswith("  ✗ latin"), listed
        assert listed["demo-tp4"] == "  ✓ demo-tp4 (hides shipped)", listed
        assert listed["demo-secret"] == "▸ ✓ demo-secret", listed

        # the source as the plan shows it: secret values masked, the rest verbatim
        await wait_for(pilot, lambda: len(shown(app, "source")) > 30, 5, "the source laid out")
        source = shown(app, "source")
        assert any(line.endswith(' HF_TOKEN = "********"') for line in source), source
        assert any(line.endswith(" # was ********") for line in source), source
        # wrapped lines joined, without the line numbers and spaces
        flat = "".join("".join(re.sub(r"^ *\d* ", "", line).split()) for line in source)
        assert '"--trust-remote-code","--api-key","********","--chunked-prefill-size",' in flat
        assert TOKEN not in flat and API_KEY not in flat, source

        # the file that is not UTF-8: its error in the pane, nothing crashed
        recipe_list = main.query_one(RecipeList)  # highlighted as the operator does: after any
        recipe_list.highlighted = recipe_list.get_option_index("latin")  # highlight still queued
        await wait_for(pilot, lambda: shown(app, "summary")[:1] == ["latin"], 5, "the latin recipe")
        summary = " ".join(" ".join(shown(app, "summary")).split())
        assert summary.startswith("latin cannot be loaded: fix the problems below"), summary
        await wait_for(pilot, lambda: len(shown(app, "lint")) > 1, 5, "the lint laid out")
        lint = " ".join(" ".join(shown(app, "lint")).split())
        assert "lint: 1 error(s)" in lint and "2:1 not UTF-8 text (byte 29)" in lint, lint

        # the copy that hides the shipped demo-tp4 says so
        recipe_list.highlighted = recipe_list.get_option_index("demo-tp4")
        await wait_for(pilot, lambda: "hides the shipped demo-tp4" in " ".join(
            " ".join(shown(app, "summary")).split()), 5, "demo-tp4 and what it hides")


async def test_a_recipe_holding_markup_and_escapes_shows_them_as_text(tmp_path: Path) -> None:
    """A recipe's name and args with ``[/red]`` and an ESC: the pane and the plan dialog show
    them written out (``\\x1b``, ``[/red]``), as ``sparktui plan`` does; no ESC reaches the
    terminal (one did: the pane's title cleared the screen, the plan's command set colours)."""
    folder = tmp_path / "recipes"
    shutil.copytree(RECIPES / "demo-tp4", folder / "hostile")
    path = folder / "hostile" / "recipe.toml"
    text = path.read_text()
    for old, new in (('name = "Demo engine TP4 (sparktui demo engine, not a real model)"',
                      'name = "Hostile [/red] x \\u001b[2J demo"'),
                     ('"--served-model-name", "demo-tp4",',
                      '"--served-model-name", "m[/red]\\u001b[31mRED\\u001b]0;pwned\\u0007",')):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)
    options = ConsoleOptions([folder], CLUSTER4, live=False, recipe="hostile", remember=False,
                             cursor_blink=False)
    app = SparkApp(options)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the console to open")
        await wait_for(pilot, lambda: "sglang" in " ".join(shown(app, "summary")), 5,
                       "the summary laid out")
        summary = " ".join(" ".join(shown(app, "summary")).split())  # wrapped lines joined
        assert summary.startswith("Hostile [/red] x \\x1b[2J demo sglang"), summary
        await wait_for(pilot, lambda: len(shown(app, "source")) > 30, 5, "the source laid out")
        assert not any("\x1b" in line for part in ("summary", "lint", "source")
                       for line in shown(app, part))

        await pilot.press("p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PlanScreen", 5, "the plan")
        await pilot.pause(0.3)
        lines = [strip.text for static in app.screen.query(Static)
                 for strip in static.render_lines(Region(0, 0, *static.size))]
        plan = "".join("".join(lines).split())
        assert "m[/red]\\x1b[31mRED\\x1b]0;pwned\\x07" in plan, plan
        assert not any("\x1b" in line or "\x07" in line for line in lines)
