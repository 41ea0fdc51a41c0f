"""The command palette (ctrl+p): every action of the main screen, each rank's log, every recipe
and every theme, by name.

Textual parses a hit's text and its help as markup when they are ``str`` (``Matcher.highlight``
too): recipe and theme names are outside text, so every hit is built as ``Content`` here
(``ui.outside``), highlighted by hand, and a recipe whose name is unsafe is not offered at all.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content

from sparktui.core.controls import visible
from sparktui.ui.keys import KEYS
from sparktui.ui.outside import content

if TYPE_CHECKING:
    from sparktui.ui.screens.main_screen import MainScreen

Command = tuple[str, Callable[[], object], str]


def highlighted(matcher: Matcher, name: str) -> Content:
    """``Matcher.highlight`` without its markup parse: the matched letters reversed."""
    shown = Content(name)
    for offset in matcher.fuzzy_search.match(matcher.query, name)[1]:
        if not name[offset].isspace():
            shown = shown.stylize(matcher.match_style, offset, offset + 1)
    return shown


async def hits(matcher: Matcher | None, commands: list[Command]) -> Hits:
    """Hits whose texts are ``Content``: every one without ``matcher`` (the palette just
    opened), else those it matches. A ``str`` help is markup to the palette; ``Content`` is
    passed through as it is, whatever the annotation says."""
    for name, command, help_text in commands:
        help_shown: str | None = content(help_text) if help_text else None  # type: ignore[assignment]
        if matcher is None:
            yield DiscoveryHit(Content(name), command, text=name, help=help_shown)
        elif (score := matcher.match(name)) > 0:
            yield Hit(score, highlighted(matcher, name), command, text=name, help=help_shown)


class TextProvider(Provider):
    """A provider whose hits are text: ``commands()`` gives names, callbacks and helps."""

    def commands(self) -> list[Command]:
        raise NotImplementedError

    async def discover(self) -> Hits:
        async for hit in hits(None, self.commands()):
            yield hit

    async def search(self, query: str) -> Hits:
        async for hit in hits(self.matcher(query), self.commands()):
            yield hit


class SparkCommands(TextProvider):
    def _main(self) -> MainScreen | None:
        from sparktui.ui.screens.main_screen import MainScreen

        for screen in self.app.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        return None

    def commands(self) -> list[Command]:
        """Names and helps, outside parts written out (``core.controls``)."""
        main = self._main()
        if main is None:
            return []
        app = self.app
        keymap = getattr(app, "keymap", {})
        out: list[Command] = []
        for spec in KEYS:
            if not spec.palette:
                continue
            keys = ", ".join(app.get_key_display(Binding(k.strip(), ""))
                             for k in keymap.get(spec.id, spec.key).split(","))
            out.append((spec.command, partial(app.run_action, spec.action, main),
                        f"{spec.description} · key {keys}"))
        out.append(("Grep: clear", main.logs.clear_grep, "Show every line again"))
        for rank in range(main.store.world):
            out.append((f"Logs: rank {rank}", partial(app.run_action, f"show_rank({rank})", main),
                        f"Only rank {rank}'s log, and select rank {rank}"))
        for info in main.infos:
            if info.name_ok:  # an unsafe name is listed as unusable, never an action
                out.append((f"Recipe: {info.slug}", partial(main.activate, info.slug),
                            f"Open {info.slug} on its cluster"))
        for name in getattr(app, "theme_names", []):
            shown = visible(name)
            out.append((f"Theme: {shown}", partial(setattr, app, "theme", name), f"Switch to {shown}"))
        return out


class ThemeCommands(TextProvider):
    """Textual's theme search (its "Change theme" command), theme names as text: a user's theme
    file names its theme."""

    def commands(self) -> list[Command]:
        def choose(name: str) -> None:
            self.app.theme = name

        return [(visible(name), partial(choose, name), "")
                for name in sorted(self.app.available_themes)]
