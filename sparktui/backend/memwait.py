"""A restart's wait (``core.memwait``): the launch's memory baseline, read on every node before
the first container starts and kept in the run's events; then, each restart, after the old
containers are removed and before the new ones start, a wait per node until its available
memory is back to within ``restart_margin`` of that baseline and no process of the old
container remains, polled every second up to ``restart_wait`` (then it goes on and says so).
The ranks show it as they wait: ``restarting`` with the cause ``memory_wait`` and the figures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from sparktui.backend.board import Board
from sparktui.backend.nodememory import read_memory
from sparktui.backend.nodeshell import NodeError, NodeShell
from sparktui.backend.runtime import RuntimeLost
from sparktui.backend.runtimes.base import Leftovers, OldProcesses
from sparktui.backend.together import together
from sparktui.core.cluster import Node
from sparktui.core.errors import sentence
from sparktui.core.memwait import (
    BASELINE_EVENT,
    POLL_S,
    PROGRESS_EVERY_S,
    WAIT_EVENT,
    Baseline,
    NodeWait,
    leftover_argv,
    parse_leftovers,
    timeout_text,
)
from sparktui.core.plan import MemoryPlan
from sparktui.core.ranks import Cause, RankInfo
from sparktui.core.runstore import Run
from sparktui.core.units import format_bytes

READ_TIMEOUT_S = 5.0
"""One reading of a node's memory or processes; a node slower than this is said, not waited."""


async def node_leftovers(shell: NodeShell, container_id: str) -> list[int]:
    """The node's processes whose ``/proc/PID/cgroup`` names ``container_id`` (a fixed script,
    the id checked hex and passed as its argument); NodeError with a sentence when the node
    cannot be asked."""
    try:
        argv = leftover_argv(container_id)
    except ValueError as exc:
        raise NodeError(shell.node.name, f"its old processes were not looked for: {exc}") from None
    res = await shell.run(argv, timeout=READ_TIMEOUT_S * 2)
    try:
        return parse_leftovers(res.stdout)
    except ValueError as exc:
        why = (res.stderr.strip().splitlines() or [str(exc)])[-1]
        raise NodeError(shell.node.name, f"its old processes could not be listed: {why}") from None


async def read_baseline(shells: Mapping[str, NodeShell],
                        nodes: Sequence[Node]) -> dict[str, Baseline | str]:
    """Every node's memory now, or why it cannot be read (a sentence)."""
    names = list(dict.fromkeys(n.name for n in nodes))

    async def one(name: str) -> Baseline | str:
        shell = shells.get(name)
        if shell is None:
            return "this runtime reads no node's memory"
        try:
            mem = await read_memory(shell, timeout=READ_TIMEOUT_S)
        except NodeError as exc:
            return sentence(exc)
        return Baseline(name, mem.available, mem.total)

    return dict(zip(names, await together(*(one(n) for n in names)), strict=True))


def record_baseline(board: Board, run: Run, shells: Mapping[str, NodeShell],
                    got: Mapping[str, Baseline | str]) -> dict[str, Baseline]:
    """``read_baseline``'s readings recorded as the launch's baseline (``memory-baseline`` in
    the run's events); a node that could not be read is said, and its restarts will not wait
    on it (a runtime with no shell on its nodes: said at each restart instead)."""
    found = {n: b for n, b in got.items() if isinstance(b, Baseline)}
    missing = {n: why for n, why in got.items() if isinstance(why, str)}
    run.event(BASELINE_EVENT, nodes=[b.to_json() for b in found.values()],
              missing=[{"node": n, "why": w} for n, w in missing.items()])
    unread = {n: w for n, w in missing.items() if n in shells}
    if unread:
        board.notice("warning", "no memory reading before the launch on "
                     + "; ".join(f"{n} ({w})" for n, w in unread.items())
                     + ": a restart will not wait for memory to come back there")
    return found


class RestartWait:
    """One restart's wait: ``remember`` before the old containers stop (a local rank's
    processes are known by their tree, gone once it is removed), ``wait`` once they are
    removed."""

    def __init__(self, board: Board, run: Run, memory: MemoryPlan | None, runtime: object,
                 shells: Mapping[str, NodeShell], baselines: Mapping[str, Baseline],
                 infos: Sequence[RankInfo]) -> None:
        self.board, self.run, self.memory = board, run, memory
        self.runtime, self.shells, self.baselines = runtime, shells, baselines
        self.infos = list(infos)
        self.nodes = list(dict.fromkeys(i.node.name for i in self.infos))
        self.olds: dict[str, list[OldProcesses]] = {n: [] for n in self.nodes}
        self.not_looked: dict[str, str] = {}  # node -> why its old processes are not looked for
        self._shown: dict[int, tuple[str | None, float]] = {}  # rank -> figures shown, when

    async def remember(self) -> None:
        runtime = self.runtime

        async def one(info: RankInfo) -> None:
            if not info.container_id or info.removed:
                return
            if not isinstance(runtime, Leftovers):
                kind = getattr(getattr(runtime, "kind", None), "name", "this")
                self.not_looked[info.node.name] = (f"the {kind} runtime does not list a removed "
                                                   "rank's processes")
                return
            try:
                self.olds[info.node.name].append(
                    await runtime.remember(info.node.name, info.container_id))
            except (NodeError, RuntimeLost, OSError) as exc:
                self.not_looked[info.node.name] = sentence(exc)
        if self.memory is not None:
            await together(*(one(i) for i in self.infos))

    async def _look(self, node: str, seconds: float, margin: int) -> NodeWait:
        base = self.baselines.get(node)
        available: int | None = None
        why: str | None = None
        shell = self.shells.get(node)
        if base is not None and shell is not None:
            try:
                available = (await read_memory(shell, timeout=READ_TIMEOUT_S)).available
            except NodeError as exc:
                why = sentence(exc)
        left: list[int] | None = None
        left_why = self.not_looked.get(node)
        if left_why is None:
            try:
                found = await together(*(look() for look in self.olds[node]))
                left = sorted({pid for pids in found for pid in pids})
            except (NodeError, RuntimeLost, OSError) as exc:
                left_why = sentence(exc)
        return NodeWait(node, available, base.available if base else None, margin,
                        tuple(left) if left is not None else None, seconds, why, left_why)

    def _ranks_of(self, node: str) -> list[RankInfo]:
        return [i for i in self.infos if i.node.name == node]

    def _rows(self, waits: Sequence[NodeWait]) -> list[dict[str, object]]:
        return [{**w.to_json(), "ranks": [i.rank for i in self._ranks_of(w.node)]} for w in waits]

    def _show(self, waits: Sequence[NodeWait]) -> None:
        """Each waiting rank's cause, the node's figures: announced when they change, the
        seconds every ``PROGRESS_EVERY_S`` (a CLI prints each announcement); no event per
        figure, the run's events get a ``progress`` every few seconds instead."""
        now = time.monotonic()
        for w in waits:
            cause = Cause("memory_wait", text=w.text) if not w.done else None
            figures = w.figures if cause is not None else None
            for info in self._ranks_of(w.node):
                if info.state == "stopped" and cause is not None:
                    # the follower saw the old container's exit (our stop): it waits again
                    self.board.set_state(info, "restarting", cause)
                    self._shown[info.rank] = (figures, now)
                    continue
                mine = info.cause is not None and info.cause.code == "memory_wait"
                if info.state != "restarting" or (cause is None and not mine):
                    continue
                last = self._shown.get(info.rank)
                if (cause is not None and last is not None and last[0] == figures
                        and now - last[1] < PROGRESS_EVERY_S):
                    continue
                self._shown[info.rank] = (figures, now)
                info.cause = cause.masked(self.board.redactor.text) if cause is not None else None
                self.board.announce(info)

    async def wait(self) -> None:
        """Until every node is back (or the wait's time is up); said as it goes."""
        memory = self.memory
        if memory is None or not self.nodes:
            return
        self._say_unjudged()
        started = time.monotonic()
        began = False
        said_at = 0.0
        waits: list[NodeWait] = []
        try:
            while True:
                elapsed = time.monotonic() - started
                waits = list(await together(*(
                    self._look(n, elapsed, memory.restart_margin) for n in self.nodes)))
                if all(w.done for w in waits):
                    break
                if not began:
                    began, said_at = True, elapsed
                    pending = [w for w in waits if not w.done]
                    self.board.notice("info", "the restart waits for memory to come back and the "
                                      "old processes to go: " + "; ".join(w.figures for w in pending))
                    self.run.event(WAIT_EVENT, phase="start", limit_s=memory.restart_wait_s,
                                   nodes=self._rows(waits))
                elif elapsed - said_at >= PROGRESS_EVERY_S:
                    said_at = elapsed
                    self.run.event(WAIT_EVENT, phase="progress", nodes=self._rows(waits))
                self._show(waits)
                if elapsed >= memory.restart_wait_s:
                    self.board.notice("warning", timeout_text(waits, memory.restart_wait_s))
                    self.run.event(WAIT_EVENT, phase="timeout", seconds=round(elapsed, 1),
                                   nodes=self._rows(waits))
                    return
                await asyncio.sleep(POLL_S)
            if not began:  # nothing to wait for: the figures said all the same
                self.board.notice("info", "memory checked before the restart: "
                                  + "; ".join(_back(w) for w in waits)
                                  + ("" if self.not_looked else "; no old process left"))
                self.run.event(WAIT_EVENT, phase="none", nodes=self._rows(waits))
            else:
                elapsed = time.monotonic() - started
                waits = [replace(w, seconds=elapsed) for w in waits]
                self.board.notice("info", f"memory back after {elapsed:.0f} s, the old processes "
                                  "gone: " + "; ".join(_back(w) for w in waits) + "; the restart goes on")
                self.run.event(WAIT_EVENT, phase="end", seconds=round(elapsed, 1),
                               nodes=self._rows(waits))
        finally:
            self._show([_done(w) for w in waits])

    def _say_unjudged(self) -> None:
        """What this wait cannot judge, said once: no baseline, old processes not looked for."""
        no_base = [n for n in self.nodes if n not in self.baselines]
        if no_base:
            self.board.notice("info", "no memory reading from before the launch on "
                              f"{', '.join(no_base)}: the restart does not wait for memory there")
        by_why: dict[str, list[str]] = {}
        for node, why in self.not_looked.items():
            by_why.setdefault(why, []).append(node)
        for why, nodes in by_why.items():
            self.board.notice("info", f"{', '.join(nodes)}: the old containers' processes are not "
                              f"looked for ({why}); the restart does not wait for them")


def _done(w: NodeWait) -> NodeWait:
    """A wait that is over, whatever it last saw: nothing left to show on its ranks."""
    return NodeWait(w.node, None, None, w.margin, (), w.seconds)


def _back(w: NodeWait) -> str:
    if w.available is None or w.needed is None:
        return f"{w.node}: memory not judged"
    return (f"{w.node}: {format_bytes(w.available)} available, {format_bytes(w.needed)} "
            "needed")
