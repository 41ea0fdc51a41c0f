"""The one Textual message the backend's events travel in (see ``bridge``).

Backend events already carry the snapshots a handler needs (``sparktui.backend.events``), so
they are not copied into look-alike messages: the main screen routes each by its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from sparktui.backend.events import Event


@dataclass
class BackendEvent(Message):
    event: Event
