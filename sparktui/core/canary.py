"""The liveness canary's record: what one canary completion found, as events.jsonl keeps it and
the console, ``status`` and ``status --json`` show it.

Read back from the run's events, so a ``status`` in another process than the ``watch`` or console
that sends the canaries says the same. Pure: the backend's ``canary`` module sends and records.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sparktui.core.units import format_duration

FAILURES_TO_WEDGE = 2
"""Canary failures in a row that mark a formed group wedged (one may be a slow moment)."""

RESET_KINDS = frozenset({"ready", "restart", "down"})
"""Run events after which an earlier wedged mark no longer holds: a new boot ended, a rank was
restarted (its group with it), the run was taken down."""


@dataclass(frozen=True)
class CanaryRecord:
    """One canary: ``ok`` with its latency, or failed with why; ``failures``: in a row, this
    one included (0 when it answered)."""

    ok: bool
    at: float  # epoch second it was sent
    latency_ms: float | None = None
    why: str | None = None
    failures: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_event(cls, ev: dict[str, Any]) -> CanaryRecord | None:
        """The record of a ``canary`` run event; None for another or a damaged one."""
        if ev.get("kind") != "canary" or not isinstance(ev.get("ok"), bool):
            return None
        at, latency, why, failures = ev.get("at"), ev.get("latency_ms"), ev.get("why"), ev.get("failures")
        if not isinstance(at, (int, float)):
            return None
        return cls(ev["ok"], float(at),
                   float(latency) if isinstance(latency, (int, float)) else None,
                   why if isinstance(why, str) else None,
                   failures if isinstance(failures, int) else 0)

    def sentence(self, now: float | None = None, *, brief: bool = False) -> str:
        """``canary 12 ms, 40s ago`` or ``canary failed 20s ago (2 in a row): timed out after
        1 s``; ``brief`` (a panel's subtitle): without why."""
        age = format_duration(max(0.0, (time.time() if now is None else now) - self.at))
        if self.ok:
            return f"canary {self.latency_ms or 0:.0f} ms, {age} ago"
        head = f"canary failed {age} ago ({self.failures} in a row)"
        return head if brief else f"{head}: {self.why or 'no reason given'}"


@dataclass(frozen=True)
class CanaryState:
    """What a run's events say of its canary: the last one, and whether the group is wedged
    (marked, and neither unmarked nor relaunched since)."""

    last: CanaryRecord | None
    wedged: bool

    def to_json(self) -> dict[str, Any]:
        return {"last": self.last.to_json() if self.last is not None else None,
                "wedged": self.wedged}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> CanaryState:
        """``to_json`` read back (a status document a follower wrote)."""
        last = doc.get("last")
        record = CanaryRecord.from_event({**last, "kind": "canary"}) if isinstance(last, dict) else None
        return cls(record, doc.get("wedged") is True)

    def sentence(self, now: float | None = None) -> str | None:
        if self.last is None:
            return None
        text = self.last.sentence(now)
        return text + ("; the group is wedged" if self.wedged else "")


def canary_state(events: Iterable[dict[str, Any]]) -> CanaryState:
    """The canary's state from a run's events (in their order)."""
    last: CanaryRecord | None = None
    wedged = False
    for ev in events:
        kind = ev.get("kind")
        if kind == "canary":
            last = CanaryRecord.from_event(ev) or last
        elif kind == "wedged":
            wedged = True
        elif kind == "unwedged" or kind in RESET_KINDS:
            wedged = False
    return CanaryState(last, wedged)
