"""Rank state: one place that knows what a rank's state may become, when it is ready, which
failure came first, why (a ``Cause``: a code, the sentence derived from it) and whether it still
has a container.

The Orchestrator, the CLI and the console all ask this module; nobody matches display text.
Pure and synchronous: the backend records and announces what a transition returns.
The states and their moves are ``core.rankstate``'s (re-exported here).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar, get_args

from sparktui.core.cluster import Node
from sparktui.core.engines import Engine, ReadyFacts
from sparktui.core.procs import EngineView
from sparktui.core.rankstate import (
    BOOTING,
    LAUNCHING,
    RUNNING,
    SETTLED,
    STATES,
    TRANSITIONS,
    RankState,
    assert_never,
    by_state,
)

LAST_LINES = 20

CauseCode = Literal["boot_timeout", "fatal_line", "exited", "no_exit_code", "not_running",
                    "removed_outside", "group_fell", "peer_restarted", "could_not_start",
                    "image_missing", "staging", "stopped_exit", "removed_by_down", "held",
                    "unreachable", "queued", "lost", "canary",
                    "engine_gone", "memory", "oom_killed", "memory_wait"]
"""Why a rank is in its state, as a code: what the board sets and the console and CLI read.
The sentence shown (``Cause.sentence``) and its short form (``Cause.reason``) derive from it."""


CAUSE_CODES: frozenset[str] = frozenset(get_args(CauseCode))
CAUSE_EVENT = "cause"
"""A failed rank's cause said again after its failure (``Board.name_first`` naming the rank that
failed first): the run's events hold every cause a follower said, whole."""


@dataclass(frozen=True)
class Cause:
    """Why a rank failed, stopped or waits, with what the sentence needs: the exit code, the
    rank that fell first, the fatal line, the budget spent, the text the node gave (an error,
    the last lines), and for a rank named first after the fact, the cause it had before."""

    code: CauseCode
    exit_code: int | None = None
    rank: int | None = None  # the rank the group fell with (or that was restarted alone)
    line_no: int | None = None
    seconds: float | None = None  # boot_timeout: the budget
    text: str | None = None  # the node's words: an error, a fatal line, the last lines
    before: Cause | None = None  # group_fell: the cause this rank had before it was named first

    @property
    def reason(self) -> str:
        """The short form a toast names (``sentence`` up to its first colon)."""
        match self.code:
            case "boot_timeout":
                return f"boot timed out after {self.seconds or 0:g} s"
            case "fatal_line":
                return f"line {self.line_no}"
            case "exited":
                return f"exited with code {self.exit_code}"
            case "no_exit_code":
                return "exited (no exit code)"
            case "not_running":
                return "not running (no exit code)"
            case "removed_outside":
                return "its container was removed outside sparktui"
            case "group_fell":
                head = f"rank {self.rank} failed first"
                return f"{head}; {self.before.reason}" if self.before is not None else head
            case "peer_restarted":
                return f"rank {self.rank} was restarted alone"
            case "could_not_start" | "image_missing":
                return "could not start"
            case "staging":
                return "staging"
            case "stopped_exit":
                return f"exit code {self.exit_code}"
            case "removed_by_down":
                return "removed by down"
            case "held" | "unreachable":
                return self.text or ""
            case "queued":
                return "waiting for the scheduler"
            case "lost":
                return "its place was lost"
            case "canary":
                return "the canary completion failed twice in a row"
            case "engine_gone":
                return "its engine process is gone; the container still runs"
            case "memory":
                return "memory"
            case "oom_killed":
                return "killed by the kernel"
            case "memory_wait":
                return "waiting for memory"
            case _:
                assert_never(self.code)

    @property
    def sentence(self) -> str:
        """The rank's detail, as the console's detail line and ``sparktui status`` show it."""
        match self.code:
            case "group_fell":
                head = f"rank {self.rank} failed first"
                return f"{head}; {self.before.sentence}" if self.before is not None else head
            case "held" | "unreachable":
                return self.text or ""
            case _:
                return f"{self.reason}: {self.text}" if self.text else self.reason

    def to_json(self) -> dict[str, Any]:
        """The cause whole, as the run's events keep it: an attach says it again
        (``restore_said``), last lines and the rank that failed first included."""
        out: dict[str, Any] = {"code": self.code}
        for key in ("exit_code", "rank", "line_no", "seconds", "text"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.before is not None:
            out["before"] = self.before.to_json()
        return out

    @classmethod
    def from_json(cls, data: object, depth: int = 0) -> Cause | None:
        """A cause ``to_json`` wrote; None for anything else (an event of another version, a
        file edited by hand)."""
        if not isinstance(data, dict) or data.get("code") not in CAUSE_CODES or depth > 2:
            return None
        ints = [data.get(k) for k in ("exit_code", "rank", "line_no")]
        seconds, text = data.get("seconds"), data.get("text")
        if (any(v is not None and (type(v) is not int) for v in ints)
                or (seconds is not None and type(seconds) not in (int, float))
                or (text is not None and not isinstance(text, str))):
            return None
        before = None
        if data.get("before") is not None:
            before = cls.from_json(data["before"], depth + 1)
            if before is None:
                return None
        return cls(data["code"], ints[0], ints[1], ints[2],
                   float(seconds) if seconds is not None else None, text, before)

    def masked(self, mask: Callable[[str], str]) -> Cause:
        """The cause with ``mask`` applied to the node's words (a secret an engine printed)."""
        before = self.before.masked(mask) if self.before is not None else None
        return replace(self, text=mask(self.text) if self.text is not None else None, before=before)


__all__ = [
    "BOOTING",
    "CAUSE_CODES",
    "CAUSE_EVENT",
    "LAST_LINES",
    "LAUNCHING",
    "RUNNING",
    "SETTLED",
    "STATES",
    "TRANSITIONS",
    "Cause",
    "CauseCode",
    "IllegalTransition",
    "RankInfo",
    "RankSnapshot",
    "RankState",
    "all_ready",
    "all_settled",
    "assert_never",
    "by_state",
    "first_failures",
    "ready_now",
    "restore_said",
]


class IllegalTransition(ValueError):
    """A state change the rank's life does not allow: a bug in the caller, never user input."""


@dataclass(frozen=True)
class RankSnapshot:
    """A rank as events carry it to the console and the CLI: a copy, safe to keep."""

    rank: int
    node: str
    state: RankState
    detail: str = ""  # ``cause.sentence``
    container_id: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    health: int | None = None
    started: float | None = None  # time.monotonic() at the container's start
    has_container: bool = False
    failed_at: float | None = None  # epoch of the failure on the node
    cause: Cause | None = None
    engine: EngineView | None = None  # its engine process, as last sampled (``core.procs``)
    last_line_at: float | None = None  # epoch of its last line that shows progress (``quiet``)

    @property
    def reason(self) -> str:
        """Why it failed, short (a toast's words): the cause's; a snapshot made without one (a
        test's) has its whole detail, else just "failed"."""
        if self.cause is not None:
            return self.cause.reason
        return self.detail or "failed"


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
    cause: Cause | None = None
    started: float | None = None
    last_lines: deque[str] = field(default_factory=lambda: deque(maxlen=LAST_LINES))
    stopping: bool = False  # our own stop: an exit is "stopped", not "failed"
    removed: bool = False  # down removed the container: nothing left to restart or stop
    failed_at: float | None = None  # epoch; the first rank to fail is usually the cause
    probed: bool = False  # its HTTP was asked since this launch: health None = nothing answers
    ended: bool = False  # its process's end was seen (exit, container gone, never started)
    # its last line of this launch that is not about a request served (probes write those):
    # when its node stamped it (epoch), and its text
    last_line_at: float | None = None
    last_line: str | None = None
    engine: EngineView | None = None  # its engine process in its container, as last sampled

    @property
    def detail(self) -> str:
        """Why the rank is in its state, as a sentence (derived from ``cause``)."""
        return self.cause.sentence if self.cause is not None else ""

    def silent_s(self, now: float) -> float | None:
        """Seconds since its last line (None: none this launch)."""
        return max(0.0, now - self.last_line_at) if self.last_line_at is not None else None

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    @property
    def has_container(self) -> bool:
        """Whether a container (running or exited) exists that down has not removed."""
        return self.container_id is not None and not self.removed

    def move(self, state: RankState, cause: Cause | None = None, when: float | None = None) -> bool:
        """Change state; False when nothing changed. ``when``: the epoch second a failure
        happened on the node (its log line or exit), for first-failure ordering."""
        if self.state == state and self.cause == cause:
            return False
        if state != self.state and state not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"rank {self.rank}: {self.state} -> {state}")
        self.state, self.cause = state, cause
        if state == "failed" and self.failed_at is None:
            self.failed_at = when if when is not None else time.time()
        elif state in BOOTING:
            self.failed_at = None
        if state in LAUNCHING:
            self.removed = self.probed = self.ended = False
            self.last_line_at = self.last_line = None
        if state not in RUNNING:
            self.engine = None  # no engine runs (or not yet): nothing sampled holds
        return True

    def observe(self, container_id: str, running: bool, exit_code: int | None,
                lost: str | None = None, unstarted: bool = False) -> None:
        """What attach found: a running container boots until shown ready; an exited one
        failed unless it exited cleanly; one whose place was lost (``lost``: the runtime's
        words) or that its runtime could not start (``unstarted``) failed."""
        self.container_id, self.removed, self.probed = container_id, False, False
        self.ended = not running
        if running:
            self.state, self.cause = "booting", None
            return
        self.exit_code = exit_code
        if unstarted:
            self.state, self.cause = "failed", Cause("could_not_start")
            return
        if lost is not None:
            self.state, self.cause = "failed", Cause("lost", text=lost)
            return
        self.state = "failed" if exit_code not in (0, None) else "stopped"
        self.cause = Cause("not_running") if exit_code is None else Cause("exited", exit_code)

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
                            self.has_container, self.failed_at, self.cause, self.engine,
                            self.last_line_at)


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


def restore_said(ranks: list[RankInfo], events: Iterable[dict[str, Any]]) -> None:
    """After an attach (``status`` once no process follows the run, a console opened again): a
    failed rank still on the container a follower saw fail has the cause that follower said last,
    whole (its last lines, the rank that failed first), not only its exit code. A rank since
    launched again, or on another container, is not touched."""
    said: dict[int, tuple[object, Cause]] = {}
    for ev in events:
        kind, rank = ev.get("kind"), ev.get("rank")
        if kind == "up":
            said.clear()
        elif kind in ("rank", CAUSE_EVENT) and isinstance(rank, int):
            cause = Cause.from_json(ev.get("why"))
            if kind == "rank" and (ev.get("state") != "failed" or cause is None):
                said.pop(rank, None)
            elif cause is not None:
                said[rank] = (ev.get("container_id"), cause)
    for info in ranks:
        got = said.get(info.rank)
        if (got is not None and info.state == "failed" and info.container_id is not None
                and got[0] == info.container_id):
            info.cause = got[1]
