"""The memory guard's judgement, per node, from its readings in time (``core.meminfo``).

On a unified-memory node (DGX Spark) an engine that takes too much wedges the box, sparktui's
SSH session with it: the guard must see the fall coming. Each reading is judged against the
recipe's ``[memory]`` plan: ``ok``; ``low`` (available under ``floor``: a warning, said once
until it clears); ``stop`` (under ``stop_at``: the launch is stopped, once per launch). The fall
rate over the last few seconds goes in the sentence ("1.8 GiB left on spark2, falling
3.0 GiB/s"), PSI beside it where the kernel has it. Pure and synchronous: the backend feeds
readings and acts on what comes back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from sparktui.core.meminfo import NodeMemory
from sparktui.core.ranks import Cause, RankInfo
from sparktui.core.units import format_bytes

Level = Literal["ok", "low", "stop"]
Action = Literal["warn", "clear", "stop"]

RATE_WINDOW_S = 5.0
"""The fall rate is taken over the readings of this many seconds: at one reading a second, a
boot's steps (an engine maps its weights in chunks) average out, and a fall that started two
seconds ago still shows."""
STEADY = 1 << 20
"""Under this many bytes a second either way, memory is said to be steady (a page cache's
jitter)."""
CLEAR_MARGIN = 256 << 20
"""A low node is cleared once it is this far above its floor: a node hovering at the floor
would otherwise warn and clear with every reading."""


@dataclass(frozen=True)
class Verdict:
    """One reading of one node, judged. ``rate``: bytes a second, positive when falling (None
    with a single reading in the window); ``action``: what is due now (a warning, its clearing,
    the stop), None when nothing changed."""

    node: str
    level: Level
    memory: NodeMemory
    rate: float | None
    floor: int
    stop_at: int | None
    action: Action | None = None

    @property
    def available(self) -> int:
        return self.memory.available

    @property
    def trend(self) -> str:
        """``falling 3.0 GiB/s``, ``rising 200.0 MiB/s``, ``steady``; "" without a rate."""
        if self.rate is None:
            return ""
        if abs(self.rate) < STEADY:
            return "steady"
        return f"{'falling' if self.rate > 0 else 'rising'} {format_bytes(abs(self.rate))}/s"

    @property
    def sentence(self) -> str:
        """``1.8 GiB left on spark2, falling 3.0 GiB/s``: the figures a cause and a notice say."""
        trend = self.trend
        return f"{format_bytes(self.available)} left on {self.node}" + (f", {trend}" if trend else "")

    @property
    def pressure(self) -> str:
        """PSI where the kernel has it: ``memory pressure some 12.0 %, full 3.1 % in the last
        10 s``."""
        m = self.memory
        if m.psi_some10 is None:
            return ""
        full = f", full {m.psi_full10:.1f} %" if m.psi_full10 is not None else ""
        return f"memory pressure some {m.psi_some10:.1f} %{full} in the last 10 s"

    @property
    def threshold(self) -> str:
        """What it is judged against, for a notice: ``under the floor of 4.0 GiB``."""
        if self.level == "stop" and self.stop_at is not None:
            return f"under stop_at {format_bytes(self.stop_at)}"
        if self.level == "low":
            return f"under the floor of {format_bytes(self.floor)}"
        return f"above the floor of {format_bytes(self.floor)}"

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "level": self.level, **self.memory.to_json(),
                "rate": round(self.rate) if self.rate is not None else None,
                "floor": self.floor, "stop_at": self.stop_at, "text": self.sentence}


@dataclass
class NodeGuard:
    """One node's readings of the last ``window`` seconds and what was said of them."""

    node: str
    floor: int
    stop_at: int | None
    window: float = RATE_WINDOW_S
    said: Level = "ok"
    stopped: bool = False  # the stop acted in this launch: never twice
    readings: deque[tuple[float, int]] = field(default_factory=deque)

    def rate(self) -> float | None:
        if len(self.readings) < 2:
            return None
        (t0, a0), (t1, a1) = self.readings[0], self.readings[-1]
        return (a0 - a1) / (t1 - t0) if t1 > t0 else None

    def feed(self, memory: NodeMemory, at: float) -> Verdict:
        """``at``: when the reading came, in seconds of a monotonic clock."""
        if self.readings and at < self.readings[-1][0]:
            self.readings.clear()  # a clock that went back: the rate starts over
        self.readings.append((at, memory.available))
        while len(self.readings) > 2 and at - self.readings[1][0] >= self.window:
            self.readings.popleft()
        avail = memory.available
        if self.stop_at is not None and avail < self.stop_at:
            level: Level = "stop"
        elif avail < self.floor or (self.said != "ok" and avail < self.floor + CLEAR_MARGIN):
            level = "low"
        else:
            level = "ok"
        action: Action | None = None
        if level == "stop" and not self.stopped:
            action, self.stopped = "stop", True
        elif level != "ok" and self.said == "ok":
            action = "warn"
        elif level == "ok" and self.said != "ok":
            action = "clear"
        self.said = level
        return Verdict(self.node, level, memory, self.rate(), self.floor, self.stop_at, action)

    def arm(self) -> None:
        """A new launch: the stop may act again (what was said of the level stands)."""
        self.stopped = False


class MemoryGuard:
    """Every node's ``NodeGuard``, for one plan's ``floor`` and ``stop_at``."""

    def __init__(self, nodes: list[str], floor: int, stop_at: int | None,
                 window: float = RATE_WINDOW_S) -> None:
        self.nodes = {n: NodeGuard(n, floor, stop_at, window) for n in dict.fromkeys(nodes)}

    def feed(self, node: str, memory: NodeMemory, at: float) -> Verdict:
        return self.nodes[node].feed(memory, at)

    def arm(self) -> None:
        """A new launch (``up``, a restart): a stop may act again."""
        for guard in self.nodes.values():
            guard.arm()

    @property
    def stopped(self) -> bool:
        """The stop acted in this launch (on any node)."""
        return any(g.stopped for g in self.nodes.values())

    def stop_all(self) -> None:
        """The stop acted on one node: the launch is stopped, so no other node's stop acts in it
        (on the local cluster every node is this one machine, and all cross at once)."""
        for guard in self.nodes.values():
            guard.stopped = True


MEMORY_STOP = "memory-stop"
"""The run's event of a stop: the figures, the ranks stopped, every rank's container then."""


def restore_causes(ranks: list[RankInfo], events: Iterable[dict[str, Any]]) -> None:
    """After an attach (``status`` in another process): the ranks the guard stopped, still on
    the containers it stopped, are failed with its cause, and the rest of their group with
    ``group_fell``, as the process that stopped them said. A later launch or restart of a
    rank, or a container of its that runs, is not touched."""
    stop: dict[str, Any] | None = None
    for ev in events:
        kind = ev.get("kind")
        if kind == MEMORY_STOP:
            stop = ev
        elif kind == "up":
            stop = None
    if stop is None:
        return
    containers = stop.get("containers") or {}
    stopped = [r for r in stop.get("ranks") or [] if isinstance(r, int)]
    text = stop.get("text")
    at = stop.get("at")
    if not stopped or not isinstance(containers, dict) or not isinstance(text, str):
        return
    for info in ranks:
        if info.state not in ("failed", "stopped") or info.container_id is None:
            continue
        if containers.get(str(info.rank)) != info.container_id:
            continue  # restarted since, or never had that container
        info.state = "failed"
        info.cause = (Cause("memory", text=text) if info.rank in stopped
                      else Cause("group_fell", rank=stopped[0]))
        if isinstance(at, (int, float)):
            info.failed_at = float(at) if info.rank in stopped else float(at) + 0.001
