"""Add a boot check: a pattern (literal with ... wildcards, or re:REGEX) and the ranks it needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from sparktui.core.patterns import compile_pattern
from sparktui.ui.outside import content
from sparktui.ui.screens.dialog import Dialog


@dataclass(frozen=True)
class NewCheck:
    pattern: str
    ranks: str | list[int]  # "any", "all" or rank numbers


def parse_ranks(text: str, world: int) -> str | list[int]:
    """``any`` (default), ``all`` or rank numbers such as ``0,2``; ValueError with a sentence."""
    text = text.strip().lower()
    if text in ("", "any"):
        return "any"
    if text == "all":
        return "all"
    try:
        ranks = sorted({int(part) for part in text.replace(" ", ",").split(",") if part})
    except ValueError:
        raise ValueError('ranks: write any, all, or rank numbers such as 0,2') from None
    bad = [r for r in ranks if not 0 <= r < world]
    if bad or not ranks:
        raise ValueError(f"ranks: rank {bad[0] if bad else '?'} does not exist (0-{world - 1})")
    return ranks


class AddCheckScreen(Dialog[NewCheck | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", id="add-check-cancel")]

    def __init__(self, world: int) -> None:
        super().__init__()
        self.world = world

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = "add a boot check"
            dialog.border_subtitle = "enter add · esc cancel"
            yield Label("Line that must show (... matches any text; re: starts a regex)")
            yield Input(placeholder="KV cache ready: #tokens=...", id="pattern")
            yield Label(f"Ranks: any, all, or numbers such as 0,2 (0-{self.world - 1})")
            yield Input(value="any", id="ranks")
            yield Static("", id="error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Add (enter)", id="add", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#pattern", Input).focus()

    def _error(self, text: str) -> None:
        self.query_one("#error", Static).update(content(text))  # may quote the pattern

    def on_input_changed(self, event: Input.Changed) -> None:
        self._error("")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "add":
            self._submit()
        else:
            self.dismiss(None)

    def _submit(self) -> None:
        pattern = self.query_one("#pattern", Input).value
        try:
            compile_pattern(pattern)
            ranks = parse_ranks(self.query_one("#ranks", Input).value, self.world)
        except ValueError as exc:
            self._error(str(exc))
            return
        self.dismiss(NewCheck(pattern, ranks))

    def action_cancel(self) -> None:
        self.dismiss(None)
