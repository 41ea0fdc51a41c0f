"""What the backend tells its listeners (the TUI, the CLI).

One model: an event carries the data its listener needs (a snapshot, never a live object), so a
handler renders from the event it got and never reaches into the Orchestrator. Small and
batched: log lines travel in lists, never one event per line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sparktui.core.canary import CanaryRecord
from sparktui.core.checks import BootChecks, CheckUpdate
from sparktui.core.memguard import Verdict
from sparktui.core.metrics import PulseKey
from sparktui.core.ranks import RankSnapshot
from sparktui.core.runstore import Run
from sparktui.core.stall import Stall
from sparktui.core.telemetry import NodeSample


@dataclass(frozen=True)
class Event:
    pass


@dataclass(frozen=True)
class RunStarted(Event):
    """The run that is followed from now on: a new launch (``fresh``) or one found on attach.
    Lines and checks of an earlier run no longer belong on screen. ``run`` is the handle on
    the run's files (the console reads history from them)."""

    run: Run
    fresh: bool


@dataclass(frozen=True)
class RankChanged(Event):
    """Anything about a rank changed: state, health, container, restarts."""

    rank: RankSnapshot


@dataclass(frozen=True)
class LogBatch(Event):
    run_id: str
    rank: int
    lines: list[tuple[int, str, str]]  # (line number in the run's log, timestamp, text)


@dataclass(frozen=True)
class ChecksChanged(Event):
    """What changed, and every check as it stands after the change."""

    updates: list[CheckUpdate]
    checks: BootChecks


@dataclass(frozen=True)
class StallChanged(Event):
    """A booting rank went quiet while the others printed (or every rank did), or printed
    again (``stall`` None): a warning, the boot goes on to its timeout."""

    stall: Stall | None


@dataclass(frozen=True)
class NodeChanged(Event):
    node: str
    status: Literal["connected", "reconnecting", "unreachable"]
    detail: str = ""


@dataclass(frozen=True)
class AllocationChanged(Event):
    """The scheduler's allocation the ranks run in, as a sentence ("" once there is none)."""

    text: str


@dataclass(frozen=True)
class CanaryChanged(Event):
    """The liveness canary's latest completion (``[liveness]``): ok with its latency, or failed
    with why; the console shows its latency and age."""

    record: CanaryRecord


@dataclass(frozen=True)
class MemoryChanged(Event):
    """The memory guard's news of a node (``backend.memguard``): under its floor
    (``action`` warn), back above it (clear), or under ``stop_at`` and the launch stopped
    (stop), with the reading and its fall rate. A notice says the same in a sentence."""

    verdict: Verdict


@dataclass(frozen=True)
class MetricsChanged(Event):
    """A rank's engine metrics after a scrape (``backend.metrics``): its pulse's current
    values, and why the last scrape failed (``stale``; the values are the last good ones)."""

    rank: int
    values: Mapping[PulseKey, float | None]
    stale: str | None
    last_ok: float | None  # time.monotonic() of the last good scrape


@dataclass(frozen=True)
class Notice(Event):
    level: Literal["info", "warning", "error"]
    text: str


@dataclass(frozen=True)
class StagingProgress(Event):
    """One node's staging, as its agent reports it."""

    node: str
    job: str
    phase: str  # scan, verify, pack, done, failed
    file: str | None = None
    bytes_done: int = 0
    bytes_total: int = 0
    rate: float = 0.0  # bytes per second
    eta: float | None = None  # seconds
    error: str | None = None
    result: dict[str, object] | None = None


@dataclass(frozen=True)
class NodeTelemetry(Event):
    """A node's latest sample, or why there is none. ``status`` is honest about age: a sample
    older than two intervals is ``stale``; a node that refuses us is ``unreachable``."""

    node: str
    status: Literal["ok", "stale", "unreachable"]
    sample: NodeSample | None = None
    cpu_pct: float | None = None
    detail: str = ""
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (code, sentence)
    age_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        """As ``status --json`` and the status document give a node."""
        return {"node": self.node, "status": self.status, "detail": self.detail,
                "warnings": self.warnings, "sample": self.sample.to_json() if self.sample else None}


@dataclass(frozen=True)
class ImageSyncProgress(Event):
    """One target node of an image sync (``sparktui image sync``, the doctor's sync key).

    ``phase``: ``skipped`` (it already has the source's build), ``sending`` (bytes of the
    ``docker save`` stream on their way), ``loading`` (all sent; its engine registers the
    layers), ``done`` (loaded and the image id checked), ``failed`` (``error`` says why).
    ``bytes_total`` is the source image's size, an estimate of the archive's length."""

    node: str
    image: str
    source: str
    phase: Literal["skipped", "sending", "loading", "done", "failed"]
    bytes_done: int = 0
    bytes_total: int = 0
    rate: float = 0.0  # bytes per second over the last few seconds
    eta: float | None = None  # seconds
    image_id: str | None = None
    error: str | None = None
