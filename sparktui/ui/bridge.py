"""From Orchestrator events to Textual messages.

The Orchestrator calls its listeners on the event loop Textual runs on, so posting a message is
all it takes; nothing here blocks or touches a widget.
"""

from __future__ import annotations

from textual.message_pump import MessagePump

from sparktui.backend.events import Event, LogBatch
from sparktui.ui.messages import BackendEvent


class EventBridge:
    """An Orchestrator listener that posts each event to ``target``. A closed bridge drops
    events, so a recipe switched away from cannot paint over the new one."""

    def __init__(self, target: MessagePump) -> None:
        self.target = target
        self.closed = False

    def __call__(self, event: Event) -> None:
        if self.closed or (isinstance(event, LogBatch) and not event.lines):
            return
        self.target.post_message(BackendEvent(event))
