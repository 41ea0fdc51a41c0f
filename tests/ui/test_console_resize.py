"""The console made narrow and wide again, as an operator's terminal is: the footer follows (no
command palette key when narrow; once it stayed after shrinking, half over the other keys)."""

from __future__ import annotations

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.conftest import CLUSTER4, RECIPES
from tests.ui.conftest import wait_for


def palette_keys(app: SparkApp) -> list[FooterKey]:
    return list(app.main_screen.query_one(Footer).query(".-command-palette").results(FooterKey))


async def test_the_footer_follows_the_terminal_to_60x20_and_back() -> None:
    app = SparkApp(ConsoleOptions([RECIPES], CLUSTER4, live=False, recipe="demo-tp4",
                                  remember=False, cursor_blink=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 15, "the console to open")
        await wait_for(pilot, lambda: len(palette_keys(app)) == 1, 5, "the palette key")
        await pilot.resize_terminal(60, 20)
        await wait_for(pilot, lambda: not palette_keys(app), 5, "the narrow footer")
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: len(palette_keys(app)) == 1, 5, "the wide footer again")


async def test_a_tiny_terminal_gives_the_ranks_and_logs_the_whole_width() -> None:
    """At 40 columns the recipes column took 22 and left the rank table 16; below 60 it goes
    (ctrl+p still opens recipes) and comes back when the terminal grows."""
    app = SparkApp(ConsoleOptions([RECIPES], CLUSTER4, live=False, recipe="demo-tp4",
                                  remember=False, cursor_blink=False))
    async with app.run_test(size=(40, 12)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the console to open")
        side = main.query_one("#side")
        await wait_for(pilot, lambda: not side.display, 5, "no recipes column")
        assert main.ranks_table.region.width == 40
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: side.display and side.region.width == 24, 5, "the column back")

