"""The recipes found in the recipes folders; enter opens one on the cluster. Names are outside
text (a folder's name): written out, never markup; one that cannot be a recipe's name is listed
with why, disabled (it cannot be highlighted or opened)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from sparktui.catalog import RecipeInfo
from sparktui.core.controls import visible
from sparktui.ui.colors import theme_colors


class RecipeList(OptionList):
    DEFAULT_CSS = """
    RecipeList {
        height: auto;
        max-height: 40%;
        background: $surface;
        border: none;
        padding: 0;
    }
    """

    @dataclass
    class Highlighted(Message):
        slug: str

    @dataclass
    class Activated(Message):
        slug: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.infos: list[RecipeInfo] = []
        self.active: str | None = None

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(
            self, lambda _theme: self.show_recipes(self.infos, self.active))

    def show_recipes(self, infos: list[RecipeInfo], active: str | None) -> None:
        self.infos = infos
        self.active = active
        highlighted = self.highlighted
        self.clear_options()
        self.add_options(Option(self._prompt(info), id=info.slug if info.name_ok else None,
                                disabled=not info.name_ok) for info in infos)
        if active is not None and any(i.slug == active for i in infos):
            self.highlighted = self.get_option_index(active)
        elif highlighted is not None and infos:
            self.highlighted = min(highlighted, len(infos) - 1)

    def set_active(self, slug: str | None) -> None:
        self.show_recipes(self.infos, slug)

    def _prompt(self, info: RecipeInfo) -> Text:
        variables = theme_colors(self.app.theme_variables)
        if not info.name_ok:  # its name first; the events view has the whole sentence
            return Text.assemble("  ", ("✗ ", variables.get("error", "red")), visible(info.slug),
                                 (" · not a usable recipe name", variables.get("text-muted", "")))
        if info.errors:
            mark = Text("✗ ", variables.get("error", "red"))
        elif info.warnings:
            mark = Text("! ", variables.get("warning", "yellow"))
        else:
            mark = Text("✓ ", variables.get("success", "green"))
        active = "▸ " if info.slug == self.active else "  "
        text = Text.assemble(active, mark, (visible(info.slug), "bold" if info.slug == self.active else ""))
        if info.hides:  # a ./recipes copy that hides the shipped recipe (or another folder's)
            text.append(" (hides shipped)" if info.hides_shipped else " (hides another)",
                        variables.get("text-muted", ""))
        return text

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Highlighted(event.option.id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.Activated(event.option.id))
