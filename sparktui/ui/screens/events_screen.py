"""Every notice and error of this session, newest last, with the full text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from sparktui.core.controls import visible
from sparktui.ui.colors import theme_colors
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
        v = theme_colors(self.app.theme_variables)
        if not self.events:
            return Text("Nothing happened yet.", v.get("text-muted", ""))
        text = Text()
        for i, ev in enumerate(self.events):
            if i:
                text.append("\n")
            text.append(f"{ev.when} ", v.get("text-muted", ""))
            text.append(f"{ev.level:<7} ", f"bold {v.get(LEVEL_COLOR.get(ev.level, ''), '')}".strip())
            text.append(visible(ev.text))  # nodes' and engines' words (report wrote them out)
        return text
