"""The follower's status document, kept in the run's folder while it follows.

``Orchestrator.status_document`` is what ``status --json`` prints and what the CLI's text is
written from (``cli.render.status_lines``), whoever made it. A console or a ``watch`` that
follows a run keeps it in the run's folder (``StatusKeeper``; what may be shown, and when:
``core.statusdoc``): a ``status`` beside it shows that instead of asking every node again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from sparktui.backend.events import (
    AllocationChanged,
    CanaryChanged,
    ChecksChanged,
    Event,
    MemoryChanged,
    NodeChanged,
    NodeTelemetry,
    RankChanged,
    RunStarted,
    StallChanged,
)
from sparktui.core.statusdoc import KEEP_EVERY_S, write_status

WAKE_ON = (RunStarted, RankChanged, ChecksChanged, StallChanged, NodeChanged, AllocationChanged,
           CanaryChanged, MemoryChanged)
"""What the document is written again for at once, not at the next second: a status run right
after a rank failed or a canary answered shows it. Not a batch of lines, a metric or a good
sample (many a second; the next second's document has them)."""
GATHER_S = 0.05
"""After such an event, how long the others of the same moment (a group's ranks fall together)
are waited for, so they make one write."""


class StatusKeeper:
    """Writes ``source()`` (the run's folder and the document's JSON, or None: nothing to keep
    now) every ``KEEP_EVERY_S``, and at once when what it says changes (``touch``); a fault of
    its own is said through ``on_fault`` and ends it (``status`` then works it out itself)."""

    def __init__(self, source: Callable[[], tuple[Path, str] | None],
                 on_fault: Callable[[str], None]) -> None:
        self.source = source
        self.on_fault = on_fault
        self.written = 0
        self._wake = asyncio.Event()

    def touch(self, event: Event) -> None:
        """Every event the follower emits: one that changes what status shows wakes the loop."""
        if isinstance(event, WAKE_ON) or (isinstance(event, NodeTelemetry) and event.status != "ok"):
            self._wake.set()

    def keep(self) -> bool:
        """Write the document once; False when there is none now or it could not be written
        (a full disk: ``status`` then finds it stale and asks the nodes itself)."""
        found = self.source()
        if found is None:
            return False
        ok = write_status(*found)
        self.written += ok
        return ok

    async def loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                self.keep()
            except Exception as exc:
                self.on_fault(f"the status document is no longer kept: {type(exc).__name__}: {exc}")
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), KEEP_EVERY_S)
                await asyncio.sleep(GATHER_S)
