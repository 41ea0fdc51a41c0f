"""The memory guard while ranks boot and serve: every node's ``MemAvailable`` (and PSI) read by
one long-lived command per node through its connection, judged by ``core.memguard``.

Every ``BOOT_INTERVAL_S`` while any rank boots (a boot is when memory goes: weights, KV cache,
CUDA graphs), every telemetry interval once no rank does; the command is started again with the
new interval when that changes. Under ``[memory] floor``: a warning (a notice, a run event
``memory-low``, a ``MemoryChanged``), said once until it clears (``memory-ok``). Under
``stop_at``: the launch is stopped before the host wedges, once per launch: the containers of
the ranks on that node are stopped, those ranks failed with cause ``memory`` and the figures,
the rest of the group failed with them (the board's ``group_lost``), a run event
``memory-stop``. It is one of the Orchestrator's jobs while it follows a run: with no sparktui
following, nothing guards.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Literal

from sparktui.backend.board import Board
from sparktui.backend.events import Event, MemoryChanged
from sparktui.backend.nodeshell import NodeError, NodeShell
from sparktui.backend.runtime import Containers, RuntimeLost
from sparktui.backend.together import together
from sparktui.core.errors import sentence
from sparktui.core.memguard import MEMORY_STOP, MemoryGuard, Verdict
from sparktui.core.meminfo import MEM_END, memory_loop_argv, parse_memory
from sparktui.core.ranks import BOOTING, RUNNING, Cause
from sparktui.core.telemetry import DEFAULT_INTERVAL

BOOT_INTERVAL_S = 1.0
"""A reading a second while a rank boots: an engine can take GiBs a second while it loads."""
STOP_GRACE_S = 2.0
"""A stopped rank's engine gets this long to exit on SIGTERM before it is killed: memory is
still going while it waits."""
STOP_TIMEOUT_S = 30.0
"""How long closing the Orchestrator waits for a stop under way to finish."""
POLL_S = 0.5
"""How often the ranks' states are looked at for the interval (and a new launch)."""
LAUNCHING = BOOTING | {"restarting"}


class MemoryWatch:
    def __init__(self, board: Board, shells: dict[str, NodeShell], runtimes: dict[str, Containers],
                 emit: Callable[[Event], None], *, interval: float = DEFAULT_INTERVAL,
                 boot_interval: float = BOOT_INTERVAL_S) -> None:
        """``interval``: seconds between readings once no rank boots."""
        self.board = board
        self.shells = shells
        self.runtimes = runtimes
        self.emit = emit
        self.ready_interval = interval
        self.boot_interval = boot_interval
        memory = board.plan.memory
        nodes = [n for n in dict.fromkeys(i.node.name for i in board.ranks) if n in shells]
        self.guard = (MemoryGuard(nodes, memory.floor, memory.stop_at)
                      if memory is not None else None)
        self.latest: dict[str, Verdict] = {}
        self.readings = 0
        self.interval = self.wanted()
        self.closed = False
        self._wake = {n: asyncio.Event() for n in nodes}
        self._launch: float | None = board.boot_started
        self._stopping: asyncio.Task[None] | None = None
        self._unread: set[str] = set()  # nodes whose memory cannot be read: said once

    def wanted(self) -> float:
        """The interval the ranks' states ask for now."""
        booting = any(i.state in LAUNCHING for i in self.board.ranks)
        return self.boot_interval if booting else self.ready_interval

    async def loop(self) -> None:
        """The job: one reading loop per node, the interval kept to the ranks' states."""
        if self.guard is None or not self._wake:
            return
        tasks = [asyncio.create_task(self._node(n), name=f"memory-{n}") for n in self._wake]
        try:
            while not self.closed:
                await asyncio.sleep(POLL_S)
                self.tick()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def tick(self) -> None:
        """A new launch arms the stop again; a new interval restarts every node's command."""
        if self.closed:
            return
        if self.guard is not None and self.board.boot_started != self._launch:
            self._launch = self.board.boot_started
            self.guard.arm()
        wanted = self.wanted()
        if wanted != self.interval:
            self.interval = wanted
            for wake in self._wake.values():
                wake.set()

    async def _node(self, node: str) -> None:
        """One long-lived reading command; when it ends (the connection dropped) it is said
        once, and started again an interval later."""
        lines: list[str] = []

        def on_line(line: str) -> None:
            if line == MEM_END:
                self.reading(node, "\n".join(lines) + "\n", time.monotonic())
                lines.clear()
            else:
                lines.append(line)

        wake = self._wake[node]
        while not self.closed:
            lines.clear()
            wake.clear()
            interval = self.interval
            stream = asyncio.create_task(self.shells[node].stream(memory_loop_argv(interval), on_line))
            woken = asyncio.create_task(wake.wait())
            try:
                done, _ = await asyncio.wait({stream, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (stream, woken):
                    task.cancel()
                await asyncio.gather(stream, woken, return_exceptions=True)
            if stream not in done:
                continue  # a new interval (or closing): started again at once
            exc = stream.exception()
            self._cannot_read(node, exc.reason if isinstance(exc, NodeError) else
                              sentence(exc) if exc is not None else "the reading command ended")
            await asyncio.sleep(interval)

    def _cannot_read(self, node: str, why: str) -> None:
        if node in self._unread:
            return
        self._unread.add(node)
        self.board.notice("warning", f"memory guard: {node}'s memory cannot be read ({why}); "
                                     "trying again")

    def reading(self, node: str, text: str, at: float) -> Verdict | None:
        """One reading's output (``memory_loop_argv``'s block), judged and acted on."""
        assert self.guard is not None
        try:
            memory = parse_memory(text)
        except ValueError as exc:
            self._cannot_read(node, str(exc))
            return None
        self._unread.discard(node)
        self.readings += 1
        v = self.guard.feed(node, memory, at)
        self.latest[node] = v
        if v.action == "warn":
            self._say(v, "memory-low", "warning", f"memory low: {v.sentence}, {v.threshold}")
        elif v.action == "clear":
            self._say(v, "memory-ok", "info", f"memory back: {v.sentence}, {v.threshold}")
        elif v.action == "stop":
            self.stop(v)
        return v

    def _say(self, v: Verdict, kind: str, level: Literal["info", "warning"], text: str) -> None:
        if v.pressure:
            text += f" ({v.pressure})"
        if self.board.run is not None:
            self.board.run.event(kind, **v.to_json())
        self.emit(MemoryChanged(v))
        self.board.notice(level, text)

    def stop(self, v: Verdict) -> None:
        """Under ``stop_at``: the ranks on the node failed with the figures at once (so a
        waiting ``up`` ends), the rest of the group with them, their containers stopped."""
        assert self.guard is not None
        self.guard.stop_all()
        board = self.board
        here = [i for i in board.ranks if i.node.name == v.node and i.state in RUNNING | BOOTING]
        stopped = {i.rank: i.container_id for i in here if i.container_id and not i.removed}
        if board.run is not None:
            board.run.event(MEMORY_STOP, **v.to_json(), ranks=[i.rank for i in here],
                            containers={str(i.rank): i.container_id for i in board.ranks},
                            at=time.time())
        self.emit(MemoryChanged(v))
        names = ", ".join(str(i.rank) for i in here)
        what = (f"rank{'s' if len(here) > 1 else ''} {names} on {v.node} stopped before the host "
                "wedges" if here else f"no rank runs on {v.node}")
        pressure = f" ({v.pressure})" if v.pressure else ""
        board.notice("error", f"memory: {v.sentence}, {v.threshold}: {what}{pressure}")
        if not here:
            return
        cause = Cause("memory", text=v.sentence)
        board.formed = False  # the group's fall is named here, with this node's ranks first
        for info in here:
            board.set_state(info, "failed", cause)
        board.group_lost(here[0], "group_fell")
        self._stopping = asyncio.create_task(self._stop_containers(v.node, stopped),
                                             name=f"memory-stop-{v.node}")

    async def _stop_containers(self, node: str, containers: dict[int, str]) -> None:
        rt = self.runtimes[node]

        async def one(rank: int, cid: str) -> None:
            try:
                await rt.stop(cid, timeout=STOP_GRACE_S)
            except (RuntimeLost, NodeError) as exc:
                self.board.notice("error", f"rank {rank} ({node}): its container could not be "
                                           f"stopped: {sentence(exc)}")
        await together(*(one(r, c) for r, c in containers.items()))

    async def close(self) -> None:
        """No more readings; a stop under way is finished first (its containers must go)."""
        self.closed = True
        if self._stopping is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self._stopping), STOP_TIMEOUT_S)
