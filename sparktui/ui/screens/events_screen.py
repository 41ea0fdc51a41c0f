"""Every notice and error of this session, newest last, with the full text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from sparktui.core.controls import visible
from sparktui.ui.console_state import NoticeRecord
from sparktui.ui.screens.dialog import Dialog

LEVEL_COLOR = {"error": "error", "warning": "warning", "info": "primary"}


class EventsScreen(Dialog[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,e", "dismiss", "close", id="events-close")]

    def __init__(self, events: Sequence[NoticeRecord]) -> None:
        super().__init__()
        self.events = list(events)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = f"events · {len(self.events)}"
            dialog.border_subtitle = "newest last · esc close"
            with VerticalScroll(id="events-scroll"):
                yield Static(self._text(), id="events-text")

    def on_mount(self) -> None:
        self.query_one("#events-scroll", VerticalScroll).scroll_end(animate=False)

    def _text(self) -> Text:
        if not self.events:
            return Text("Nothing happened yet.", self.ink("muted"))
        text = Text()
        for i, ev in enumerate(self.events):
            if i:
                text.append("\n")
            text.append(f"{ev.when} ", self.ink("muted"))
            level = LEVEL_COLOR.get(ev.level)
            text.append(f"{ev.level:<7} ", (self.ink(level) if level else Style()) + Style(bold=True))
            text.append(visible(ev.text))  # nodes' and engines' words (report wrote them out)
        return text
