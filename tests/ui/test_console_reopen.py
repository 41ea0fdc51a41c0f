"""Opening the recipe that is already open (the command palette, the recipe list) keeps the view:
no crash, the same session, the same grep and log view. Opening another recipe and coming back
mounts its staging rows again without clashing ids."""

from __future__ import annotations

from pathlib import Path

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.conftest import RECIPES
from tests.ui import fuzz, reopen
from tests.ui.conftest import wait_for


async def test_reopening_each_shipped_recipe_keeps_the_view(tmp_path: Path) -> None:
    slugs = sorted(p.name for p in RECIPES.iterdir() if (p / "recipe.toml").is_file())
    assert {"demo-tp4", "demo-vllm-tp4", "dsv41-flash-4x-mia"} <= set(slugs)
    options = ConsoleOptions([RECIPES], None, state_root=state_dir(), recipe=slugs[0], remember=False,
                             cursor_blink=False)
    app = SparkApp(options)
    async with app.run_test(size=(140, 44)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 20, "the first recipe")
        for slug in slugs:
            await reopen.palette_open(pilot, slug)
            await wait_for(pilot, lambda s=slug: reopen.opened(main, s), 20, f"{slug} open")
            await reopen.grep_then_rank(pilot, main, "rank", 1)
            before = reopen.view(main)
            assert before[1] == "rank" and before[2] == 1
            await reopen.palette_open(pilot, slug)  # the open one again: nothing changes
            assert reopen.view(main) == before, slug
            await reopen.list_open(pilot, main, slug)
            assert reopen.view(main) == before, slug
            assert app.screen is main
            await fuzz.press(app, "escape")  # clears the grep for the next one
            await wait_for(pilot, lambda: not main.logs.model.line_filter.text, 5, "the grep cleared")
        # back and forth between two recipes that stage on the same nodes: rows re-mounted
        seed = "dsv41-flash-4x-mia"
        for slug in (seed, "demo-tp4", seed, seed):
            await reopen.palette_open(pilot, slug)
            await wait_for(pilot, lambda s=slug: reopen.opened(main, s), 20, f"{slug} open")
        assert main.staging.display and len(main.staging.children) == 4
