"""The sparktui console: one keyboard-driven screen for a recipe running on a cluster."""

from __future__ import annotations

from textual import events
from textual.app import App
from textual.await_complete import AwaitComplete
from textual.binding import Keymap
from textual.command import CommandPalette
from textual.screen import Screen

from sparktui.core.controls import visible
from sparktui.ui.commands import SparkCommands, ThemeCommands
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.main_screen import MainScreen
from sparktui.ui.screens.palette import Palette
from sparktui.ui.settings import Settings, load_settings, load_state, save_state
from sparktui.ui.themes import DEFAULT_THEME, LoadedThemes, load_themes, rank_color_defaults


class SparkApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "sparktui"
    COMMANDS = App.COMMANDS | {SparkCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, options: ConsoleOptions, *, theme: str | None = None,
                 settings: Settings | None = None, themes: LoadedThemes | None = None) -> None:
        """``theme``: this start's theme (else the last chosen, else config.toml's, else the
        default)."""
        super().__init__()
        self._theme_ready = False
        self.options = options
        self.settings = settings if settings is not None else load_settings()
        self.loaded_themes = themes if themes is not None else load_themes()
        remember = self.remember = options.remember
        for t in self.loaded_themes.themes:
            self.register_theme(t)
        self.theme_names = [t.name for t in self.loaded_themes.themes]
        state = load_state() if remember else {}
        if options.recipe is None and isinstance(state.get("recipe"), str):
            options.recipe = state["recipe"]
        wanted = [theme, state.get("theme") if remember else None, self.settings.theme, DEFAULT_THEME]
        self.start_theme = next((t for t in wanted if isinstance(t, str) and t in self.available_themes),
                                "textual-dark")
        self.theme = self.start_theme  # before anything renders, so nothing starts in another theme
        self.keymap: Keymap = dict(self.settings.keys)
        self.main_screen = MainScreen(options)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return rank_color_defaults()

    def get_default_screen(self) -> Screen[None]:
        return self.main_screen

    def on_mount(self) -> None:
        self._theme_ready = True
        if self.keymap:
            self.set_keymap(self.keymap)
        for problem in [*map(str, self.settings.problems), *self.loaded_themes.problems]:
            self.main_screen.report("warning", problem)

    def watch_theme(self, name: str) -> None:
        if self._theme_ready and self.remember:
            save_state({"theme": name})

    def next_theme(self) -> None:
        """The next of sparktui's themes (shipped and the user's)."""
        names = self.theme_names or list(self.available_themes)
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        self.notify(f"theme: {visible(self.theme)}", timeout=2, markup=False)  # a theme file names it

    def pop_screen(self) -> AwaitComplete:
        """Never the main screen: a dismiss that arrives late (a key typed twice while a screen
        closes, Textual's palette included) finds it on top and would pop it."""
        if len(self.screen_stack) <= 1:
            return AwaitComplete()
        return super().pop_screen()

    async def on_event(self, event: events.Event) -> None:
        """A key typed while the console closes finds no screen (they are gone, the queue is
        not): Textual's binding lookup raised ScreenStackError at the exit."""
        if isinstance(event, events.Key) and not self.screen_stack:
            return
        await super().on_event(event)

    def action_command_palette(self) -> None:
        """One palette at a time, and no fixed id: Textual pushes its palette as
        ``#--command-palette``, and ctrl+p just after one closed pushed a second while the
        first, off the stack, still held that id (DuplicateIds). Open is known by class."""
        if self.use_command_palette and not any(isinstance(s, CommandPalette) for s in self.screen_stack):
            self.push_screen(Palette())

    def search_themes(self) -> None:
        """Textual's "Change theme" command, in the safe palette (it pushes its own), theme
        names as text (Textual's ThemeProvider hands them to the markup parser)."""
        self.push_screen(Palette(providers=[ThemeCommands], placeholder="Search for themes…"))

    async def action_quit(self) -> None:
        """Quit; the containers keep running and the next start reattaches."""
        await self.main_screen.close_session()
        self.exit()
