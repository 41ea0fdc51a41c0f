"""Every rank's stacks at once (``sparktui dump``, the console's dump key): per rank, in
parallel, the engine's Python stacks, the last ``TAIL_LINES`` lines of its log (the run's files)
and its container's processes; saved under ``<run>/dumps/<UTC stamp>/rank<N>.txt`` (0600 in
0700 folders, secrets masked) and recorded as the run's ``dump`` event.

Stacks: ``py-spy dump`` run inside the container where the image has it (it reads the
process's memory: nothing is asked of the engine); else the engine's stack signal
(``core.procs.stack_signal``: the demo engine's SIGUSR1; SGLang and vLLM have none), and the
lines the rank printed after it, read from the run's files for at most ``SIGNAL_WAIT_S``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from sparktui.backend.board import Board
from sparktui.backend.runtimes.base import Processes
from sparktui.backend.together import together
from sparktui.core.engines import engine
from sparktui.core.private import private_dir, write_private
from sparktui.core.procs import (
    PROC_HEADER,
    EngineSample,
    Proc,
    marks_of,
    masked,
    stack_lines,
    stack_signal,
)
from sparktui.core.ranks import RankInfo
from sparktui.core.runstore import Run

TAIL_LINES = 200
PY_SPY_TIMEOUT_S = 20.0
SIGNAL_WAIT_S = 5.0  # the longest a rank is given to print its stacks after the signal
SIGNAL_QUIET_S = 0.5  # a stack block that printed nothing more for this long is whole
POLL_S = 0.1
NO_PY_SPY = 127

@dataclass(frozen=True)
class RankDump:
    """One rank's dump: how its stacks were taken (``py-spy``, a signal's name, or ``none``
    with the reason in ``note``), the stacks, its processes and its last lines."""

    rank: int
    node: str
    how: str
    stacks: list[str]
    note: str
    processes: list[Proc]
    last_lines: list[str]
    seconds: float
    engine_pid: int | None = None

    def text(self) -> str:
        """The rank's file, as the console shows it too."""
        parts = [f"rank {self.rank} on {self.node} · engine pid {self.engine_pid or '-'} · "
                 f"stacks by {self.how} · {self.seconds:.2f} s"]
        if self.note:
            parts.append(self.note)
        parts += ["", "== stacks =="] + (self.stacks or ["(none)"])
        parts += ["", "== processes ==", PROC_HEADER] + [p.line() for p in self.processes]
        parts += ["", f"== last {len(self.last_lines)} lines ==", *self.last_lines]
        return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class DumpResult:
    folder: Path
    ranks: list[RankDump] = field(default_factory=list)
    seconds: float = 0.0


class Dumper:
    """One dump of every rank; ``refresh`` copies what the containers printed into the run's
    files when no follower of this process does (``Orchestrator.catch_up``)."""

    def __init__(self, board: Board, runtime: Processes, run: Run,
                 refresh: Callable[[], Awaitable[None]]) -> None:
        self.board = board
        self.runtime = runtime
        self.run = run
        self._refresh = refresh
        self._refreshing = asyncio.Lock()
        adapter = engine(board.plan.engine)
        self.marks = marks_of(adapter.process_marks)
        self.adapter_signal = adapter.stack_signal
        self.mask = board.redactor.text

    async def refresh(self) -> None:
        async with self._refreshing:  # ranks waiting on one another's catch-up share it
            await self._refresh()

    def tail(self, rank: int, start: int = 1) -> list[str]:
        last: deque[str] = deque(maxlen=TAIL_LINES)
        for _no, _ts, text in self.run.log(rank).read(start):
            last.append(self.mask(text))
        return list(last)

    async def one(self, info: RankInfo) -> RankDump:
        started = time.monotonic()
        node, cid = info.node.name, info.container_id
        procs: list[Proc] = []
        how, note, pid = "none", "", None
        stacks: list[str] = []
        if cid is None or info.removed or info.ended:
            note = "no running container: its last lines only"
        else:
            try:
                procs = masked(await self.runtime.processes(node, cid), self.mask)
            except Exception as exc:  # stopped meanwhile, node lost
                note = f"its processes could not be listed: {exc}"
            main = EngineSample.of(procs, self.marks).main
            if main is None and not note:
                note = "no engine process in its container"
            elif main is not None:
                pid = main.pid
                how, note, stacks = await self.stacks(info, cid, main)
        await self.refresh()
        last = await asyncio.to_thread(self.tail, info.rank)  # hours of log: not on the loop
        return RankDump(info.rank, node, how, stacks, self.mask(note), procs, last,
                        time.monotonic() - started, pid)

    async def stacks(self, info: RankInfo, cid: str, main: Proc) -> tuple[str, str, list[str]]:
        """(how, note, stack lines): py-spy, else the stack signal, else why neither."""
        node = info.node.name
        inner = await self.runtime.container_pid(node, cid, main.pid)
        if inner is None:
            return "none", f"engine pid {main.pid} is gone", []
        argv = ["py-spy", "dump", "--pid", str(inner)]
        code, output = await self.runtime.exec(node, cid, argv, PY_SPY_TIMEOUT_S)
        # a read of a process that moved under it, or one that printed nothing (CI's loaded
        # lane met an empty dump, exit 0): once more
        if code not in (0, NO_PY_SPY) or (code == 0 and not output.strip()):
            code, output = await self.runtime.exec(node, cid, argv, PY_SPY_TIMEOUT_S)
        if code == 0:
            return "py-spy", "", [self.mask(line) for line in output.splitlines()]
        tried = ("the image has no py-spy" if code == NO_PY_SPY
                 else f"py-spy failed ({code}): {output.strip()[:300]}")
        sig = stack_signal(self.adapter_signal, main)
        if sig is None:
            return "none", (f"{tried}; {self.board.plan.engine} has no stack signal: "
                            "install py-spy in the image"), []
        await self.refresh()
        start = await asyncio.to_thread(lambda: self.run.log(info.rank).lines + 1)
        await self.runtime.send_signal(node, cid, main.pid, sig)
        return sig, tried, await self._printed(info.rank, start)

    async def _printed(self, rank: int, start: int) -> list[str]:
        """The stack block the rank printed from line ``start`` on, once it stopped growing."""
        deadline = time.monotonic() + SIGNAL_WAIT_S
        found: list[str] = []
        grew = time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            await self.refresh()
            now = stack_lines(await asyncio.to_thread(
                lambda: [t for _n, _ts, t in self.run.log(rank).read(start)]))
            if len(now) != len(found):
                found, grew = now, time.monotonic()
            elif found and time.monotonic() - grew >= SIGNAL_QUIET_S:
                break
        return [self.mask(line) for line in found]


def stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


async def dump_ranks(board: Board, runtime: Processes, run: Run,
                     refresh: Callable[[], Awaitable[None]]) -> DumpResult:
    """Every rank at once; each rank's file written, the folder recorded as the run's event."""
    started = time.monotonic()
    dumper = Dumper(board, runtime, run, refresh)
    ranks = list(await together(*(dumper.one(i) for i in board.ranks)))
    def save() -> Path:
        folder = private_dir(run.dir / "dumps" / stamp())
        for d in ranks:
            write_private(folder / f"rank{d.rank}.txt", d.text())
        return folder
    folder = await asyncio.to_thread(save)
    seconds = time.monotonic() - started
    run.event("dump", folder=str(folder), seconds=round(seconds, 2),
              ranks={str(d.rank): d.how for d in ranks})
    return DumpResult(folder, ranks, seconds)
