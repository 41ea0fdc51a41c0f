"""The one Textual message the backend's events travel in (see ``bridge``).

Backend events already carry the snapshots a handler needs (``sparktui.backend.events``), so
they are not copied into look-alike messages: the main screen routes each by its type.

Events that arrive at high rates and say all there is to say each time (a node's telemetry
sample, its staging or image-sync progress) merge: while the screen is busy, a newer one of the
same node waiting right behind an older one replaces it (``can_replace``), so a slow frame does
not leave a queue of stale samples to paint one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from sparktui.backend.events import Event, ImageSyncProgress, NodeTelemetry, StagingProgress

LATEST_ONLY = (NodeTelemetry, StagingProgress, ImageSyncProgress)


def supersedes(newer: Event, older: Event) -> bool:
    """``newer`` says everything ``older`` said: the same kind of report about the same node
    (and, for staging, the same job)."""
    if type(newer) is not type(older) or not isinstance(older, LATEST_ONLY):
        return False
    assert isinstance(newer, LATEST_ONLY)
    if isinstance(older, StagingProgress) and isinstance(newer, StagingProgress) and \
            older.job != newer.job:
        return False
    return newer.node == older.node


@dataclass
class BackendEvent(Message, bubble=False):
    """Handled by the main screen alone. A bubbling message goes on to the app's queue, where
    keys wait too: under a 32-rank flood that was some 290 messages a second that no one
    handles, queued ahead of the keys typed."""

    event: Event

    def can_replace(self, message: Message) -> bool:
        """Textual asks this of the message about to be handled with the next one queued:
        True drops this one for ``message``."""
        return isinstance(message, BackendEvent) and supersedes(message.event, self.event)
