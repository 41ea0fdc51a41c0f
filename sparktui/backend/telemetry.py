"""Samples every node over its existing connection: one cheap command per node per interval."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from sparktui.backend.events import NodeTelemetry
from sparktui.backend.nodeshell import NodeError, NodeShell
from sparktui.core.cluster import Node
from sparktui.core.plan import Plan
from sparktui.core.telemetry import (
    DEFAULT_INTERVAL,
    END,
    LOW_MEMORY,
    NodeSample,
    parse_sample,
    sample_argv,
    sample_loop_argv,
    valid_path,
)
from sparktui.core.units import format_bytes


@dataclass
class _NodeState:
    last: NodeSample | None = None
    last_ok: float | None = None
    status: str = "stale"


def watched_paths(plan: Plan, node: Node) -> list[str]:
    """Where free space matters on this node: its staging destinations and its HF cache (those
    that are absolute; see ``invalid_paths``)."""
    paths = [s.dst for s in plan.staging if s.node == node.name]
    return [p for p in dict.fromkeys([*paths, node.hf_cache]) if valid_path(p)]


def invalid_paths(plan: Plan, node: Node) -> list[str]:
    """Watched paths that are not absolute: never sent to the node, reported as invalid
    (validation refuses them, so only a hand-built plan has any)."""
    paths = [s.dst for s in plan.staging if s.node == node.name]
    return [p for p in dict.fromkeys([*paths, node.hf_cache]) if not valid_path(p)]


class Sampler:
    def __init__(self, plan: Plan, nodes: list[Node], shells: dict[str, NodeShell],
                 emit: Callable[[NodeTelemetry], None], interval: float = DEFAULT_INTERVAL,
                 low_memory: int = LOW_MEMORY) -> None:
        self.plan = plan
        self.nodes = nodes
        self.shells = shells
        self.emit = emit
        self.interval = interval
        self.low_memory = low_memory
        self.state = {n.name: _NodeState() for n in nodes}
        self.latest: dict[str, NodeTelemetry] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def warnings(self, node: Node, sample: NodeSample) -> list[tuple[str, str]]:
        """``(code, sentence)``: the code stays the same while the numbers in the sentence move,
        so a listener reports a warning once until it clears."""
        out = [(f"invalid-path:{p}", f"{p}: not an absolute path on {node.name}; its free "
                "space cannot be watched") for p in invalid_paths(self.plan, node)]
        if node.index == 0 and sample.mem_available < self.low_memory:
            out.append(("low-memory", f"head memory low: {format_bytes(sample.mem_available)} available "
                       f"(warn below {format_bytes(self.low_memory)})"))
        for job in (s for s in self.plan.staging if s.node == node.name):
            disk = sample.disk(job.dst)
            if disk is not None and disk.free < job.min_free_bytes:
                out.append((f"low-disk:{job.dst}", f"{job.dst}: {format_bytes(disk.free)} free, "
                            f"below min_free {format_bytes(job.min_free_bytes)}"))
        return out

    def _publish(self, event: NodeTelemetry) -> None:
        self.latest[event.node] = event
        self.emit(event)

    async def sample(self, node: Node) -> NodeTelemetry:
        """One sample now; never raises."""
        st = self.state[node.name]
        paths = watched_paths(self.plan, node)
        try:
            res = await self.shells[node.name].run(sample_argv(paths),
                                                       timeout=max(5.0, 2 * self.interval))
        except NodeError as exc:
            st.status = "unreachable"
            return NodeTelemetry(node.name, "unreachable", st.last, None, exc.reason,
                                 age_s=self._age(st))
        return self._parsed(node, res.stdout, paths)

    def _age(self, st: _NodeState) -> float:
        return time.monotonic() - st.last_ok if st.last_ok is not None else float("inf")

    def _parsed(self, node: Node, text: str, paths: list[str]) -> NodeTelemetry:
        st = self.state[node.name]
        sample = parse_sample(text, paths)
        cpu = sample.cpu_pct(st.last)
        st.last, st.last_ok, st.status = sample, time.monotonic(), "ok"
        return NodeTelemetry(node.name, "ok", sample, cpu, warnings=self.warnings(node, sample))

    async def _loop(self, node: Node) -> None:
        """One long-lived sampling command per node; when it ends (the connection dropped),
        the node is unreachable until a new one starts."""
        paths = watched_paths(self.plan, node)
        st = self.state[node.name]
        lines: list[str] = []
        while True:
            lines.clear()

            def on_line(line: str) -> None:
                if line == END:
                    self._publish(self._parsed(node, "\n".join(lines) + "\n", paths))
                    lines.clear()
                else:
                    lines.append(line)

            try:
                await self.shells[node.name].stream(sample_loop_argv(paths, self.interval),
                                                        on_line)
                detail = "the sampling command ended"
            except NodeError as exc:
                detail = exc.reason
            st.status = "unreachable"
            self._publish(NodeTelemetry(node.name, "unreachable", st.last, None, detail,
                                        age_s=self._age(st)))
            await asyncio.sleep(self.interval)

    async def _watchdog(self) -> None:
        """A sample that is late (a hung connection) turns the node stale after two intervals."""
        while True:
            await asyncio.sleep(self.interval / 2)
            for node in self.nodes:
                st = self.state[node.name]
                age = self._age(st)
                if st.status == "ok" and age > 2 * self.interval:
                    st.status = "stale"
                    self._publish(NodeTelemetry(node.name, "stale", st.last, None,
                                                f"no sample for {age:.0f} s", age_s=age))

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._loop(n), name=f"telemetry-{n.name}")
                           for n in self.nodes]
            self._tasks.append(asyncio.create_task(self._watchdog(), name="telemetry-watchdog"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
