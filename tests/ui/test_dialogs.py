"""Dialogs close once and only from the top, and one over another closes cleanly. Each case is
a sequence the console fuzz found (tests/ui/fuzz.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.command import CommandList, CommandPalette

from sparktui.backend.doctor import Finding
from sparktui.ui.app import SparkApp
from sparktui.ui.screens.doctor_screen import DoctorScreen
from tests.ui import fuzz
from tests.ui.conftest import wait_for


def _stack(app: SparkApp) -> list[str]:
    return [type(s).__name__ for s in app.screen_stack]


def _found(app: SparkApp, title: str) -> bool:
    """The command palette's first hit starts with ``title`` (it searches in batches: on a busy
    machine the hits come later than a fixed wait)."""
    screen = app.screen
    if not isinstance(screen, CommandPalette):
        return False
    found = screen.query(CommandList)  # not there yet while the palette mounts
    if not found or found.first().option_count == 0:
        return False
    hits = found.first()
    prompt = hits.get_option_at_index(hits.highlighted or 0).prompt
    return str(getattr(prompt, "plain", prompt)).startswith(title)


async def test_help_over_plan_then_both_closed(offline_app: Callable[..., SparkApp]) -> None:
    """Seed 1 (300 steps): help opened from the palette over the plan, closed, then the plan
    no longer closed and the console answered no key (a dialog attribute shadowed Textual's)."""
    app = offline_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        await fuzz.press(app, "p")
        await wait_for(pilot, lambda: _stack(app)[-1] == "PlanScreen", 5, "the plan")
        await fuzz.press(app, "ctrl+p", *"help")
        await asyncio.sleep(0.6)  # the palette searches in batches
        await wait_for(pilot, lambda: _found(app, "Help"), 5, "the palette's help command")
        await fuzz.press(app, "enter")
        await wait_for(pilot, lambda: _stack(app)[-1] == "HelpScreen", 5, "help over the plan")
        await fuzz.press(app, "question_mark")
        await wait_for(pilot, lambda: _stack(app) == ["MainScreen", "PlanScreen"], 5, "help closed")
        await fuzz.press(app, "escape")
        await wait_for(pilot, lambda: _stack(app) == ["MainScreen"], 5, "the plan closed")


async def test_a_double_tap_closes_one_dialog(offline_app: Callable[..., SparkApp]) -> None:
    """Seed 3: enter on a dialog's button and its own binding both dismissed; the second pop
    took the main screen (ScreenStackError)."""
    app = offline_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        for opener, screen, taps in (("question_mark", "HelpScreen", ("escape", "escape")),
                                     ("p", "PlanScreen", ("q", "escape")),
                                     ("p", "PlanScreen", ("p", "escape")),
                                     ("e", "EventsScreen", ("escape", "escape"))):
            await fuzz.press(app, opener)
            await wait_for(pilot, lambda s=screen: _stack(app)[-1] == s, 5, screen)  # type: ignore[misc]
            await pilot.pause(0.2)  # the dialog up and focused
            await fuzz.press(app, *taps)  # the dialog's key, then one more before it is gone
            await asyncio.sleep(0.3)
            assert _stack(app) == ["MainScreen"], (opener, taps)


async def test_ctrl_p_twice_opens_one_palette(offline_app: Callable[..., SparkApp]) -> None:
    """Seed 1 (step 204): ctrl+p while a palette was still open pushed a second one with the
    same id (DuplicateIds)."""
    app = offline_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        await fuzz.press(app, "p")
        await wait_for(pilot, lambda: _stack(app)[-1] == "PlanScreen", 5, "the plan")
        await fuzz.press(app, "ctrl+p", "ctrl+p", "ctrl+p")
        await wait_for(pilot, lambda: "Palette" in _stack(app), 5, "the palette")
        await asyncio.sleep(0.3)
        assert _stack(app).count("Palette") == 1
        await fuzz.press(app, "escape")
        await wait_for(pilot, lambda: "Palette" not in _stack(app), 5, "the palette closed")
        await fuzz.press(app, "escape")
        await wait_for(pilot, lambda: _stack(app) == ["MainScreen"], 5, "all closed")


async def test_doctor_closed_before_its_findings(offline_app: Callable[..., SparkApp]) -> None:
    """Seed 3 (300 steps, after image sync joined the doctor view): the doctor dismissed while
    it still ran; its findings then arrived on a screen with no table (NoMatches). Here the
    doctor's answer is held until the screen is gone."""
    app = offline_app()
    answer = asyncio.Event()

    async def slow_doctor() -> list[Finding]:
        await answer.wait()
        return [Finding("node0", "ssh", "passed", "reachable")]

    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        app.push_screen(DoctorScreen("doctor", slow_doctor))
        await wait_for(pilot, lambda: _stack(app)[-1] == "DoctorScreen", 5, "the doctor")
        screen = app.screen
        await fuzz.press(app, "escape")
        while screen.children:  # the answer comes while the screen is being taken down
            await asyncio.sleep(0)
        answer.set()
        await wait_for(pilot, lambda: _stack(app) == ["MainScreen"], 5, "the doctor closed")
        await pilot.pause(0.3)
        assert app._exception is None
        assert _stack(app) == ["MainScreen"]


async def test_palette_reopened_while_it_closes(offline_app: Callable[..., SparkApp]) -> None:
    """Seed 100 (2,000 steps): ctrl+p right after the palette closed pushed a second palette
    while the first, off the stack, still held its id (DuplicateIds)."""
    app = offline_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        for _ in range(5):
            await fuzz.press(app, "ctrl+p")
            await wait_for(pilot, lambda: _stack(app)[-1] == "Palette" and app.screen.is_mounted, 5,
                           "the palette")
            app.screen.dismiss()
            app.action_command_palette()  # in the same turn: the old one is not gone yet
            await wait_for(pilot, lambda: _stack(app)[-1] == "Palette", 5, "the palette again")
            await pilot.pause(0.3)
            assert app._exception is None
            assert _stack(app).count("Palette") == 1
            await fuzz.press(app, "escape")
            await wait_for(pilot, lambda: _stack(app) == ["MainScreen"], 5, "the palette closed")


async def test_palette_results_after_its_list_is_gone(offline_app: Callable[..., SparkApp]) -> None:
    """Seed 3 (300 steps, once in CI): a command run from the palette, then ctrl+p and a search
    at once: a search of the closing palette ended after its list was removed, and Textual's
    watcher of "list visible" looked for the list (NoMatches)."""
    from textual.command import CommandList

    app = offline_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        await fuzz.press(app, "ctrl+p", "l", "o")
        await wait_for(pilot, lambda: _stack(app)[-1] == "Palette" and app.screen.is_mounted, 5,
                       "the palette")
        palette = app.screen
        await palette.query_one(CommandList).remove()  # closing: its children go first
        palette._list_visible = not palette._list_visible  # type: ignore[attr-defined]
        await pilot.pause(0.1)
        assert app._exception is None
        palette.dismiss()
        await wait_for(pilot, lambda: _stack(app) == ["MainScreen"], 5, "the palette closed")


async def test_palette_page_keys_before_it_is_laid_out(offline_app: Callable[..., SparkApp]) -> None:
    """Seed 101 (2,000 steps): pagedown as the palette's results arrived, before the list had a
    size: Textual's option list indexed lines it had not built (KeyError)."""
    app = offline_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        for keys in (("pagedown",), ("r", "pagedown", "pageup"), ("t", "h", "pageup", "pagedown")):
            await fuzz.press(app, "ctrl+p", *keys)
            for _ in range(10):
                await fuzz.press(app, "pagedown", "pageup")
            await pilot.pause(0.3)
            assert app._exception is None
            await fuzz.press(app, "escape")
            await wait_for(pilot, lambda: _stack(app) == ["MainScreen"], 5, "the palette closed")


async def test_theme_search_is_the_safe_palette(offline_app: Callable[..., SparkApp]) -> None:
    """Seed 101 again (2,000 steps, after the fix above): the palette's "theme" entry opens
    Textual's theme search, which pushed Textual's own palette, page keys unguarded."""
    app = offline_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        for _ in range(3):
            app.search_themes()
            await fuzz.press(app, "pagedown", "pageup", "pagedown")
            await wait_for(pilot, lambda: _stack(app)[-1] == "Palette", 5, "the theme search")
            await fuzz.press(app, "pagedown", "pageup")
            await pilot.pause(0.2)
            assert app._exception is None
            await fuzz.press(app, "escape")
            await wait_for(pilot, lambda: _stack(app) == ["MainScreen"], 5, "the search closed")
