"""Opening a recipe the way an operator does (the command palette, the recipe list), and what
"the view" is, for the tests that reopen the open recipe (local cluster and test cluster)."""

from __future__ import annotations

from textual.pilot import Pilot

from sparktui.ui.app import SparkApp
from sparktui.ui.screens.main_screen import MainScreen
from sparktui.ui.widgets.recipe_list import RecipeList
from tests.ui import fuzz
from tests.ui.conftest import wait_for


async def palette_open(pilot: Pilot[None], slug: str) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await fuzz.press(app, "ctrl+p")
    await fuzz.press(app, *f"Recipe: {slug}")  # Pilot.press would wait for an idle app per key
    await pilot.pause(0.8)  # the palette searches in a worker, in batches of 0.25 s
    await fuzz.press(app, "enter")
    await wait_for(pilot, lambda: app.screen is app.main_screen, 5, "the palette to close")
    await pilot.pause(0.2)


async def list_open(pilot: Pilot[None], main: MainScreen, slug: str) -> None:
    recipes = main.query_one(RecipeList)
    recipes.focus()
    recipes.highlighted = recipes.get_option_index(slug)
    await fuzz.press(pilot.app, "enter")
    await pilot.pause(0.3)


async def grep_then_rank(pilot: Pilot[None], main: MainScreen, pattern: str, rank: int) -> None:
    """A grep typed into ``/``, then one rank's log only (its number key, from 1): a view with
    state of its own that reopening must keep."""
    await fuzz.press(pilot.app, "slash")
    await wait_for(pilot, lambda: main.logs.grep_input.has_focus, 5, "the grep input")
    await fuzz.press(pilot.app, *pattern, "enter")
    await wait_for(pilot, lambda: main.logs.model.line_filter.text == pattern, 5, "the grep")
    await fuzz.press(pilot.app, str(rank + 1))
    await wait_for(pilot, lambda: main.logs.model.shown == rank, 5, f"rank {rank}'s log")


def opened(main: MainScreen, slug: str) -> bool:
    """``slug`` is open and nothing is opening any more."""
    opening = any(w.group == "session" and not w.is_finished for w in main.workers)
    return not opening and main.session is not None and main.session.slug == slug


def view(main: MainScreen) -> tuple[object, ...]:
    logs = main.logs
    return (main.session, logs.model.line_filter.text, logs.model.shown, main.store.run_id)
