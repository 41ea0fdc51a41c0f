"""A line of outside text that keeps both its ends: cut in the middle to the width it has."""

from __future__ import annotations

from rich.cells import cell_len, get_character_cell_size
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from sparktui.core.controls import visible


def middle_cut(text: str, width: int) -> str:
    """``text`` in ``width`` cells at most, its middle given up (``checkpoint folder /tmp/…0277
    does not exist``): the end of a sentence about a long path says what is wrong. Cells, not
    characters: a wide character (CJK, most emoji) takes two."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    tail = (width - 1) // 2
    return f"{_fit(text, width - 1 - tail)}…{_fit(text[::-1], tail)[::-1]}"


def _fit(text: str, cells: int) -> str:
    """The longest start of ``text`` in ``cells`` cells (one cell short when a wide character
    would straddle the end)."""
    used = 0
    for i, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > cells:
            return text[:i]
    return text


class OneLine(Widget):
    """A staging row's progress or error: one line (a Label wraps, and the rows are one line
    high, so "does not exist" was cut off), as text, never markup."""

    DEFAULT_CSS = """
    OneLine { height: 1; }
    """

    text: reactive[str] = reactive("", layout=False)

    def __init__(self, text: str = "", *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.set_reactive(OneLine.text, text)

    def render(self) -> Text:
        return Text(middle_cut(visible(self.text), self.content_size.width), no_wrap=True, end="")
