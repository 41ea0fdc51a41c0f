"""What the console knows of the open recipe, kept without Textual: the ranks and checks as the
last events reported them, the run on screen, the notice log, failures waiting to be merged
into one toast, and telemetry warnings already reported.

The screen feeds it backend events and paints what it returns; tests drive it with no app.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sparktui.backend.events import NodeChanged, NodeTelemetry
from sparktui.core.checks import BootChecks
from sparktui.core.ranks import RankSnapshot, first_failures
from sparktui.core.runstore import Run

MAX_NOTICES = 2000


@dataclass(frozen=True)
class NoticeRecord:
    when: str  # HH:MM:SS local time
    level: str  # info, warning, error
    text: str


@dataclass
class ConsoleState:
    wall_clock: Callable[[], float] = time.time
    ranks: dict[int, RankSnapshot] = field(default_factory=dict)
    checks: BootChecks | None = None
    run: Run | None = None
    notices: list[NoticeRecord] = field(default_factory=list)
    node_status: dict[str, str] = field(default_factory=dict)
    _failed: list[RankSnapshot] = field(default_factory=list)
    _warned: set[tuple[str, str]] = field(default_factory=set)  # (node, warning code)

    def open(self, checks: BootChecks | None) -> None:
        """A recipe was opened: nothing of the last one is kept but the notice log."""
        self.ranks.clear()
        self.checks = checks
        self.run = None
        self.node_status.clear()
        self._failed.clear()
        self._warned.clear()

    def note(self, level: str, text: str) -> NoticeRecord:
        when = time.strftime("%H:%M:%S", time.localtime(self.wall_clock()))
        record = NoticeRecord(when, level, text)
        self.notices.append(record)
        del self.notices[:-MAX_NOTICES]
        return record

    @property
    def run_id(self) -> str | None:
        return self.run.id if self.run is not None else None

    def run_started(self, run: Run) -> bool:
        """True when it is another run than the one on screen (its lines start over)."""
        new = run.id != self.run_id
        self.run = run
        return new

    def rank_changed(self, snap: RankSnapshot) -> str | None:
        """Keep the snapshot; a rank that just failed returns the notice to log (its toast waits
        for the rest of the group: see ``take_failures``)."""
        before = self.ranks.get(snap.rank)
        self.ranks[snap.rank] = snap
        if snap.state != "failed" or (before is not None and before.state == "failed"):
            return None
        self._failed.append(snap)
        return f"rank {snap.rank} ({snap.node}) failed: {snap.detail}"

    @property
    def failures_waiting(self) -> bool:
        return bool(self._failed)

    def take_failures(self) -> str | None:
        """One toast for the failures reported since the last call: a TP group falls over at
        once, and the first to fail is usually the cause."""
        failed, self._failed = self._failed, []
        if not failed:
            return None
        first = first_failures(failed)[0]
        reason = first.reason
        if len(failed) == 1:
            return f"rank {first.rank} failed: {reason}"
        ranks = ", ".join(str(r) for r in sorted({s.rank for s in failed}))
        return f"ranks {ranks} failed; first rank {first.rank}: {reason} (r, then g: restart the group)"

    def node_changed(self, event: NodeChanged) -> tuple[str, str] | None:
        """``(level, text)`` to report when the node's link changed; None when it did not."""
        before = self.node_status.get(event.node)
        if before == event.status:
            return None
        self.node_status[event.node] = event.status
        if event.status != "connected":
            detail = f": {event.detail}" if event.detail else ""
            return "warning", f"node {event.node} {event.status}{detail}"
        if before is not None:
            return "info", f"node {event.node} connected again"
        return None

    def new_warnings(self, t: NodeTelemetry) -> list[str]:
        """Telemetry warnings to report: each once, until it clears."""
        codes = {code for code, _ in t.warnings}
        self._warned -= {(node, code) for node, code in self._warned
                         if node == t.node and code not in codes}
        fresh = []
        for code, text in t.warnings:
            if (t.node, code) not in self._warned:
                self._warned.add((t.node, code))
                fresh.append(f"{t.node}: {text}")
        return fresh

    def has_container(self, rank: int) -> bool:
        snap = self.ranks.get(rank)
        return snap is not None and snap.has_container

    def snapshots(self, world: int) -> tuple[RankSnapshot | None, ...]:
        """Each rank's last snapshot, by rank (None: nothing reported yet): the rank table's."""
        return tuple(self.ranks.get(rank) for rank in range(world))

    def check_summaries(self, world: int, need_run: bool = True) -> tuple[dict[str, int], ...]:
        return tuple(self.check_summary(rank, need_run) for rank in range(world))

    def check_summary(self, rank: int, need_run: bool = True) -> dict[str, int]:
        """The rank's check counts; none before a run exists (nothing can pass yet)."""
        if self.checks is None or (need_run and self.run_id is None):
            return {}
        return self.checks.rank_summary(rank)
