"""The recipes found in the recipes folders; enter opens one on the cluster. Names are outside
text (a folder's name): written out, never markup; one that cannot be a recipe's name is listed
with why, disabled (it cannot be highlighted or opened)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.reactive import var
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from sparktui.catalog import RecipeInfo
from sparktui.core.controls import visible
from sparktui.ui.formatting import ink, muted_css, palette


class RecipeList(OptionList):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *OptionList.COMPONENT_CLASSES, "recipe-list--error", "recipe-list--warning",
        "recipe-list--success", "recipe-list--muted"}
    DEFAULT_CSS = muted_css("""
    RecipeList {
        height: auto;
        max-height: 40%;
        background: $surface;
        border: none;
        padding: 0;
        & > .recipe-list--error { color: $error; }
        & > .recipe-list--warning { color: $warning; }
        & > .recipe-list--success { color: $success; }
        & > .recipe-list--muted { color: $muted; }
    }
    """)

    @dataclass
    class Highlighted(Message):
        slug: str

    @dataclass
    class Activated(Message):
        slug: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._palette: tuple[Style, ...] = ()

    infos: var[tuple[RecipeInfo, ...]] = var((), always_update=True, init=False)
    """The recipes found, in the order listed."""
    active: var[str | None] = var(None, init=False)
    """The open recipe (marked ▸, highlighted when listed)."""

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:  # the component styles are updated after this call (rank_table)
            self.call_later(self._restyle)

    def _restyle(self) -> None:
        if self.infos and palette(self) != self._palette:
            self._paint()  # another theme: the marks' colours

    def watch_infos(self) -> None:
        self._paint()

    def watch_active(self) -> None:
        self._paint()

    def _paint(self) -> None:
        infos, active = self.infos, self.active
        self._palette = palette(self)
        highlighted = self.highlighted
        self.clear_options()
        self.add_options(Option(self._prompt(info), id=info.slug if info.name_ok else None,
                                disabled=not info.name_ok) for info in infos)
        if active is not None and any(i.slug == active for i in infos):
            self.highlighted = self.get_option_index(active)
        elif highlighted is not None and infos:
            self.highlighted = min(highlighted, len(infos) - 1)

    def _prompt(self, info: RecipeInfo) -> Text:
        def styled(name: str) -> Style:
            return ink(self, f"recipe-list--{name}")
        if not info.name_ok:  # its name first; the events view has the whole sentence
            return Text.assemble("  ", ("✗ ", styled("error")), visible(info.slug),
                                 (" · not a usable recipe name", styled("muted")))
        if info.errors:
            mark = Text("✗ ", styled("error"))
        elif info.warnings:
            mark = Text("! ", styled("warning"))
        else:
            mark = Text("✓ ", styled("success"))
        active = "▸ " if info.slug == self.active else "  "
        text = Text.assemble(active, mark, (visible(info.slug), "bold" if info.slug == self.active else ""))
        if info.hides:  # a ./recipes copy that hides the shipped recipe (or another folder's)
            text.append(" (hides shipped)" if info.hides_shipped else " (hides another)",
                        styled("muted"))
        return text

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Highlighted(event.option.id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Activated(event.option.id))
