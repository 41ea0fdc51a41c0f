"""What a run's events say about a group restart, apart from the backend so that the watch's
choice (attach a run with no container left, or refuse it) is pure and tested alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


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
