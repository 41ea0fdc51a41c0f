"""The base of the console's dialogs: a modal screen that closes once.

Textual's ``dismiss`` pops whatever screen is on top. Keys arrive faster than a screen closes
(enter on a button and the screen's own binding, a double-tapped escape), so a second dismiss
would pop the screen underneath, and with it the main screen. Found by the console fuzz.
"""

from __future__ import annotations

from typing import TypeVar

from textual.await_complete import AwaitComplete
from textual.screen import ModalScreen

ResultT = TypeVar("ResultT")


class Dialog(ModalScreen[ResultT]):
    _dismissed = False

    def dismiss(self, result: ResultT | None = None) -> AwaitComplete:
        """Close with ``result``, once, and only while this dialog is the screen on top."""
        if self._dismissed or self.app.screen is not self:
            return AwaitComplete()
        self._dismissed = True
        return super().dismiss(result)
