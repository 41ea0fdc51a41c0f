"""What the backend tells its listeners (the TUI, the CLI). Small and batched: log lines travel
in lists, never one event per line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sparktui.core.checks import CheckUpdate
from sparktui.core.telemetry import NodeSample

RankStateName = Literal["pending", "staging", "creating", "booting", "ready", "failed", "stopped",
                        "restarting"]


@dataclass(frozen=True)
class Event:
    pass


@dataclass(frozen=True)
class RankChanged(Event):
    rank: int
    state: RankStateName
    detail: str = ""
    exit_code: int | None = None
    last_lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LogBatch(Event):
    rank: int
    lines: list[tuple[int, str, str]]  # (line number in the run's log, timestamp, text)


@dataclass(frozen=True)
class ChecksChanged(Event):
    updates: list[CheckUpdate]


@dataclass(frozen=True)
class HealthChanged(Event):
    rank: int
    code: int | None
    detail: str = ""


@dataclass(frozen=True)
class NodeChanged(Event):
    node: str
    status: Literal["connected", "reconnecting", "unreachable"]
    detail: str = ""


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
    warnings: list[str] = field(default_factory=list)
    age_s: float = 0.0
