"""What a run's events say about a group restart, apart from the backend so that the watch's
choice (attach a run with no container left, or refuse it) is pure and tested alone."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from sparktui.core.recipe import RestartPolicy
from sparktui.core.runstore import Run
from sparktui.core.units import format_duration


def cut_short(events: Sequence[Mapping[str, object]], policy: str) -> bool:
    """Whether a run with no container left is a group restart cut short (the containers
    removed, none made yet: a full disk, the watch killed meanwhile), which a watchdog
    finishes, rather than a run taken down: it was ready once, and no ``down`` came after its
    last ready, restart or watchdog event."""
    if policy == "off":
        return False
    kinds = [ev.get("kind") for ev in events]
    if "ready" not in kinds:
        return False
    down = max((i for i, k in enumerate(kinds) if k == "down"), default=-1)
    alive = max(i for i, k in enumerate(kinds) if k in ("ready", "restart", "watchdog"))
    return alive > down


def could_not_start(events: Sequence[Mapping[str, object]]) -> list[int]:
    """The ranks whose latest state in ``events`` is "could not start"."""
    latest: dict[int, object] = {}
    for ev in events:
        rank = ev.get("rank")
        if ev.get("kind") == "rank" and isinstance(rank, int):
            latest[rank] = ev.get("cause")
    return sorted(r for r, cause in latest.items() if cause == "could_not_start")


def restarts_in_window(run: Run, window_s: float, now: float | None = None) -> list[float]:
    """When the watchdog restarted this run's group within the window (epoch seconds)."""
    now = time.time() if now is None else now
    return [float(ev["at"]) for ev in run.events()
            if ev.get("kind") == "watchdog" and ev.get("action") == "restart"
            and isinstance(ev.get("at"), (int, float)) and now - float(ev["at"]) <= window_s]


def budget_text(policy: RestartPolicy) -> str:
    return f"{policy.max} in {format_duration(policy.window_s)}"


def summary(run: Run | None, policy: RestartPolicy) -> str | None:
    """One line for ``status``: the policy and what it spent in its window (whoever ran it)."""
    if policy.policy == "off":
        return None
    used = len(restarts_in_window(run, policy.window_s)) if run is not None else 0
    text = f"watchdog: {used} of {budget_text(policy)} group restarts used"
    last = [ev for ev in run.events() if ev.get("kind") == "watchdog"][-1:] if run is not None else []
    if last and last[0].get("action") == "budget-spent":
        text += f"; restart budget spent ({budget_text(policy)}): the group stays failed"
    return text
