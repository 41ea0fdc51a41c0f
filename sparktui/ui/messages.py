"""Textual messages carrying what the Orchestrator reported (see ``bridge``).

Log lines stay batched: one message per batch of a rank, never one per line.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from sparktui.backend.events import NodeTelemetry, RankStateName, StagingProgress
from sparktui.core.checks import CheckUpdate


@dataclass
class RankUpdated(Message):
    rank: int
    state: RankStateName
    detail: str = ""
    exit_code: int | None = None


@dataclass
class LogLines(Message):
    run_id: str | None
    rank: int
    lines: list[tuple[int, str, str]]  # (line number in the run's log, timestamp, text)


@dataclass
class ChecksUpdated(Message):
    updates: list[CheckUpdate]


@dataclass
class HealthUpdated(Message):
    rank: int
    code: int | None


@dataclass
class NodeUpdated(Message):
    node: str
    status: str
    detail: str = ""


@dataclass
class NoticePosted(Message):
    level: str  # info, warning, error
    text: str


@dataclass
class StagingUpdated(Message):
    progress: StagingProgress


@dataclass
class NodeSampled(Message):
    telemetry: NodeTelemetry
