"""Rank state: one place that knows what a rank's state may become, when it is ready, which
failure came first and whether it still has a container.

The Orchestrator, the CLI and the console all ask this module; nobody matches display text.
Pure and synchronous: the backend records and announces what a transition returns.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from sparktui.core.cluster import Node
from sparktui.core.engines import Engine, ReadyFacts

RankState = Literal["pending", "staging", "creating", "booting", "ready", "failed", "stopped",
                    "restarting"]
LAST_LINES = 20

SETTLED: frozenset[RankState] = frozenset({"ready", "failed", "stopped"})
"""States a boot ends in: waiting for the group stops once every rank is in one."""

BOOTING: frozenset[RankState] = frozenset({"creating", "booting"})
"""States in which a fatal line or the boot budget fails the rank."""

PROBED: frozenset[RankState] = frozenset({"booting", "ready"})
"""States in which a rank's engine runs and may answer its health probe. In any other state
(failed, stopped, restarting, not launched yet) a rank shows no health code: an old one would
claim an engine that is gone."""

# From a settled state a new launch starts over: staging (when the recipe stages data) or creating.
_RELAUNCH: frozenset[RankState] = frozenset({"staging", "creating", "restarting"})

TRANSITIONS: dict[RankState, frozenset[RankState]] = {
    "pending": frozenset({"staging", "creating", "failed", "stopped", "restarting"}),
    "staging": frozenset({"creating", "failed", "stopped"}),
    "creating": frozenset({"booting", "failed", "stopped"}),
    "booting": frozenset({"ready", "failed", "stopped", "restarting"}),
    "ready": frozenset({"failed", "stopped", "restarting"}),
    "failed": _RELAUNCH | {"stopped"},
    "stopped": _RELAUNCH,
    "restarting": frozenset({"creating", "failed", "stopped"}),
}
"""Every move a rank may make. What a container is found doing on attach is not a move but an
observation (``RankInfo.observe``): the container is the truth, whatever we believed."""


class IllegalTransition(ValueError):
    """A state change the rank's life does not allow: a bug in the caller, never user input."""


@dataclass(frozen=True)
class RankSnapshot:
    """A rank as events carry it to the console and the CLI: a copy, safe to keep."""

    rank: int
    node: str
    state: RankState
    detail: str = ""
    container_id: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    health: int | None = None
    started: float | None = None  # time.monotonic() at the container's start
    has_container: bool = False
    failed_at: float | None = None  # epoch of the failure on the node


@dataclass
class RankInfo:
    """One rank's live state, owned by the Orchestrator."""

    rank: int
    node: Node
    state: RankState = "pending"
    container_id: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    health: int | None = None
    detail: str = ""
    started: float | None = None
    last_lines: deque[str] = field(default_factory=lambda: deque(maxlen=LAST_LINES))
    stopping: bool = False  # our own stop: an exit is "stopped", not "failed"
    removed: bool = False  # down removed the container: nothing left to restart or stop
    failed_at: float | None = None  # epoch; the first rank to fail is usually the cause
    probed: bool = False  # its HTTP was asked since this launch: health None = nothing answers
    ended: bool = False  # its process's end was seen (exit, container gone, never started)

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    @property
    def has_container(self) -> bool:
        """Whether a container (running or exited) exists that down has not removed."""
        return self.container_id is not None and not self.removed

    def move(self, state: RankState, detail: str = "", when: float | None = None) -> bool:
        """Change state; False when nothing changed. ``when``: the epoch second a failure
        happened on the node (its log line or exit), for first-failure ordering."""
        if self.state == state and self.detail == detail:
            return False
        if state != self.state and state not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"rank {self.rank}: {self.state} -> {state}")
        self.state, self.detail = state, detail
        if state == "failed" and self.failed_at is None:
            self.failed_at = when if when is not None else time.time()
        elif state in BOOTING:
            self.failed_at = None
        if state in ("creating", "restarting"):
            self.removed = self.probed = self.ended = False
        return True

    def observe(self, container_id: str, running: bool, exit_code: int | None) -> None:
        """What attach found: a running container boots until shown ready; an exited one
        failed unless it exited cleanly."""
        self.container_id, self.removed, self.probed = container_id, False, False
        self.ended = not running
        if running:
            self.state, self.detail = "booting", ""
            return
        self.exit_code = exit_code
        self.state = "failed" if exit_code not in (0, None) else "stopped"
        self.detail = "not running (no exit code)" if exit_code is None else f"exited with code {exit_code}"

    def new_launch(self) -> None:
        """A new run: what the last one left (exit code, health, container, lines, restarts: a
        run's count, as a console that attaches to it later counts them) is gone."""
        self.exit_code, self.health, self.container_id = None, None, None
        self.restarts = 0
        self.removed = self.probed = False
        self.last_lines.clear()

    def snapshot(self) -> RankSnapshot:
        return RankSnapshot(self.rank, self.node.name, self.state, self.detail, self.container_id,
                            self.exit_code, self.restarts, self.health, self.started,
                            self.has_container, self.failed_at)


def ready_now(info: RankInfo, engine: Engine, *, line_seen: bool, head_line_seen: bool,
              head_ready: bool) -> bool:
    """Whether a booting rank is ready now, by its engine's rule (``Engine.ready``): only a
    booting rank becomes ready, so one that exited (failed or stopped) never does."""
    if info.state != "booting":
        return False
    return engine.ready(ReadyFacts(rank=info.rank, running=True, health=info.health,
                                   line_seen=line_seen, head_ready=head_ready,
                                   head_line_seen=head_line_seen, probed=info.probed))


_R = TypeVar("_R", RankInfo, RankSnapshot)


def first_failures(ranks: Iterable[_R]) -> list[_R]:
    """Failed ranks, the first to fail first: the rest of a TP group falls over with it."""
    failed = [r for r in ranks if r.state == "failed"]
    return sorted(failed, key=lambda r: r.failed_at or 0.0)


def all_ready(ranks: list[RankInfo]) -> bool:
    return all(r.state == "ready" for r in ranks)


def all_settled(ranks: list[RankInfo]) -> bool:
    return all(r.settled for r in ranks)
