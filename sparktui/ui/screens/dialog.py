"""The base of the console's dialogs: a modal screen that closes once.

Textual's ``dismiss`` pops whatever screen is on top. Keys arrive faster than a screen closes
(enter on a button and the screen's own binding, a double-tapped escape), so a second dismiss
would pop the screen underneath, and with it the main screen. Found by the console fuzz.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from rich.style import Style
from textual.await_complete import AwaitComplete
from textual.screen import ModalScreen

from sparktui.ui.formatting import ink, muted_css

ResultT = TypeVar("ResultT")


INKS = ("accent", "error", "warning", "success", "primary")


class Dialog(ModalScreen[ResultT]):
    """Its text is drawn in the theme's colours through ``ink(name)``: the dialog box is on
    ``$surface`` (the screen around it is not), so its muted shade is taken over the surface."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"dialog--muted", *(f"dialog--{n}" for n in INKS)}
    DEFAULT_CSS = muted_css("""
    Dialog {
        & > .dialog--muted { color: $muted; background: $surface; }
    """) + "\n".join(f"    & > .dialog--{n} {{ color: ${n}; }}" for n in INKS) + "\n}"

    _dismissed = False

    def ink(self, name: str) -> Style:
        """``muted``, ``accent``, ``error``, ``warning``, ``success`` or ``primary``."""
        return ink(self, f"dialog--{name}")

    def dismiss(self, result: ResultT | None = None) -> AwaitComplete:
        """Close with ``result``, once, and only while this dialog is the screen on top."""
        if self._dismissed or self.app.screen is not self:
            return AwaitComplete()
        self._dismissed = True
        return super().dismiss(result)
