"""From Orchestrator events to Textual messages.

The Orchestrator calls its listeners on the event loop Textual runs on, so posting a message is
all it takes; nothing here blocks or touches a widget.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.message_pump import MessagePump

from sparktui.backend.events import (
    ChecksChanged,
    Event,
    HealthChanged,
    LogBatch,
    NodeChanged,
    NodeTelemetry,
    Notice,
    RankChanged,
    StagingProgress,
)
from sparktui.ui.messages import (
    ChecksUpdated,
    HealthUpdated,
    LogLines,
    NodeSampled,
    NodeUpdated,
    NoticePosted,
    RankUpdated,
    StagingUpdated,
)


def to_message(event: Event, run_id: str | None = None) -> Message | None:
    if isinstance(event, LogBatch):
        return LogLines(run_id, event.rank, list(event.lines)) if event.lines else None
    if isinstance(event, RankChanged):
        return RankUpdated(event.rank, event.state, event.detail, event.exit_code)
    if isinstance(event, ChecksChanged):
        return ChecksUpdated(list(event.updates)) if event.updates else None
    if isinstance(event, HealthChanged):
        return HealthUpdated(event.rank, event.code)
    if isinstance(event, NodeChanged):
        return NodeUpdated(event.node, event.status, event.detail)
    if isinstance(event, Notice):
        return NoticePosted(event.level, event.text)
    if isinstance(event, StagingProgress):
        return StagingUpdated(event)
    if isinstance(event, NodeTelemetry):
        return NodeSampled(event)
    return None


class EventBridge:
    """An Orchestrator listener that posts each event as a message to ``target``.

    ``run_id`` tells which run a log batch belongs to (a new ``up`` starts a new run). A closed
    bridge drops events, so a recipe switched away from cannot paint over the new one.
    """

    def __init__(self, target: MessagePump, run_id: Callable[[], str | None]) -> None:
        self.target = target
        self.run_id = run_id
        self.closed = False

    def __call__(self, event: Event) -> None:
        if self.closed:
            return
        message = to_message(event, self.run_id() if isinstance(event, LogBatch) else None)
        if message is not None:
            self.target.post_message(message)
