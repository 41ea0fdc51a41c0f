"""The command palette (ctrl+p): every action of the main screen, each rank's log, every recipe
and every theme, by name."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from sparktui.ui.keys import KEYS

if TYPE_CHECKING:
    from sparktui.ui.screens.main_screen import MainScreen

Command = tuple[str, Callable[[], object], str]


class SparkCommands(Provider):
    def _main(self) -> MainScreen | None:
        from sparktui.ui.screens.main_screen import MainScreen

        for screen in self.app.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        return None

    def commands(self) -> list[Command]:
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
            out.append((f"Recipe: {info.slug}", partial(main.activate, info.slug),
                        f"Open {info.slug} on its cluster"))
        for name in getattr(app, "theme_names", []):
            out.append((f"Theme: {name}", partial(setattr, app, "theme", name), f"Switch to {name}"))
        return out

    async def discover(self) -> Hits:
        for name, command, help_text in self.commands():
            yield DiscoveryHit(name, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, command, help_text in self.commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), command, help=help_text)
