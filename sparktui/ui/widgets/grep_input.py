"""Where the grep pattern is typed: every change filters live; enter keeps it, escape clears it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input

PLACEHOLDER = "grep: a regex (a leading ! keeps the lines that do not match) · enter keeps · esc clears"


class GrepInput(Input):
    DEFAULT_CSS = """
    GrepInput {
        width: 1fr;
        height: 1;
        border: none;
        padding: 0 1;
        background: $boost;
        &:focus { border: none; background-tint: $primary 20%; }
        &.-error { color: $error; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear", "clear grep", id="grep-clear"),
    ]

    @dataclass
    class Cleared(Message):
        pass

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder=PLACEHOLDER, id=id)

    def action_clear(self) -> None:
        self.value = ""
        self.post_message(self.Cleared())
