"""The kernel's verdict on a failed rank, read through its node's connection (``core.kmsg``).

A rank whose container exited (exit 137 and Docker's ``OOMKilled`` are hints; the kernel's line
is the proof) has its node's kernel messages read since the run started: an out-of-memory kill
whose cgroup names this rank's container makes its cause ``oom_killed`` (the exit code kept in
the text), an event ``oom-killed`` in the run, a notice; the node's GPU (NVRM, Xid) and PCIe
(AER) errors since the run started are said beside it. A node whose kernel messages cannot be
read says so once per run, a sentence naming the node and what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from typing import Any

from sparktui.backend.board import Board
from sparktui.backend.findings import Finding
from sparktui.backend.nodeshell import NodeError, NodeShell
from sparktui.backend.together import together
from sparktui.core.errors import sentence
from sparktui.core.kmsg import (
    KernelFinding,
    KernelRead,
    killed,
    kmsg_argv,
    node_level,
    oom_text,
    parse_read,
    since,
)
from sparktui.core.ranks import Cause, RankInfo

OOM_EVENT = "oom-killed"
KERNEL_EVENT = "kernel"
HINT_CODES = (137,)  # SIGKILL: what an out-of-memory kill leaves as the exit code
RETRY_S = 0.5  # the kernel's line may land a moment after Docker saw the exit
RETRIES = 3
SLACK_S = 5.0  # the kernel's clock (boot time + monotonic) may lag the wall clock a little
JUDGED = ("exited", "no_exit_code", "not_running", "group_fell")
SAID_AT_MOST = 5  # node-level findings said per failure
_CONTAINER_ID = re.compile(r"[0-9a-f]{12,64}")  # a container's (a local process has none)


async def read_kernel(shell: NodeShell, timeout: float = 15.0) -> KernelRead:
    """The node's kernel messages that matter; NodeError with a sentence (the node, the
    reason, what to do) when no reader may read them."""
    res = await shell.run(kmsg_argv(), timeout=timeout)
    read = parse_read(res.stdout)
    if read.source is None:
        if not read.problems and res.stderr.strip():
            read = KernelRead(None, [], [res.stderr.strip().splitlines()[-1][:200]])
        raise NodeError(shell.node.name, read.why_not())
    return read


class KernelVerdict:
    """Judges failed ranks from their nodes' kernel messages; one per orchestrator."""

    def __init__(self, board: Board, shells: dict[str, NodeShell]) -> None:
        self.board = board
        self.shells = shells
        self.tasks: set[asyncio.Task[None]] = set()
        self._unreadable: set[tuple[str, str]] = set()  # (run id, node) said already

    def rank_exited(self, info: RankInfo, oom_hint: bool = False) -> None:
        """The follower saw the rank's container end: judge it in the background."""
        if not self._judged(info):
            return
        task = asyncio.create_task(self.judge(info, oom_hint), name=f"kmsg-{info.rank}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def restore(self, events: list[dict[str, Any]]) -> set[int]:
        """The verdicts the run's events hold (a ``status`` or console attaching later): each
        failed rank whose container is the one the kernel killed has its cause back. Returns
        the ranks restored."""
        done: set[int] = set()
        for ev in events:
            rank = ev.get("rank")
            if ev.get("kind") != OOM_EVENT or not isinstance(rank, int) or \
                    not 0 <= rank < len(self.board.ranks):
                continue
            info = self.board.ranks[rank]
            if info.state == "failed" and info.container_id == ev.get("container_id"):
                info.cause = Cause("oom_killed", info.exit_code, text=str(ev.get("detail", "")))
                done.add(rank)
        return done

    async def judge_attached(self, events: list[dict[str, Any]], timeout: float = 15.0) -> None:
        """After an attach: each failed rank the run's events hold no verdict for is judged
        now (its node read once, no retry; awaited, so a ``status`` says it)."""
        judged = self.restore(events)
        todo = [i for i in self.board.ranks
                if i.rank not in judged and i.state == "failed" and self._judged(i)
                and i.cause is not None and i.cause.code in JUDGED]
        if todo:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(together(*(self.judge(i, retry=False) for i in todo)),
                                       timeout)

    def _judged(self, info: RankInfo) -> bool:
        """Whether the rank has a container a kernel's cgroup can name, on a node we can ask."""
        return info.node.name in self.shells and info.container_id is not None and \
            _CONTAINER_ID.fullmatch(info.container_id) is not None

    def _since(self) -> float:
        run = self.board.run
        started = None
        if run is not None:
            with contextlib.suppress(OSError):
                started = run.plan_path.stat().st_mtime  # written as the run was created
        return (started if started is not None else time.time() - 3600) - SLACK_S

    async def settle(self, timeout: float = 10.0) -> None:
        """The verdicts being read, done (or given up after ``timeout``)."""
        if self.tasks:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*self.tasks, return_exceptions=True), timeout)

    async def judge(self, info: RankInfo, oom_hint: bool = False, retry: bool = True) -> None:
        """Never raises: a verdict that cannot be had is a notice (a sentence), not a traceback."""
        try:
            await self._judge(info, oom_hint, retry)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an answer this parser never saw: said, the rank's cause kept
            self.board.notice("warning", f"rank {info.rank} ({info.node.name}): its kernel "
                                         f"messages could not be judged: {sentence(exc)}")

    async def _judge(self, info: RankInfo, oom_hint: bool, retry: bool) -> None:
        container = info.container_id
        node = info.node.name
        if container is None:
            return
        hinted = oom_hint or info.exit_code in HINT_CODES
        found: list[KernelFinding] = []
        kill: KernelFinding | None = None
        for attempt in range(RETRIES if retry and hinted else 1):
            if attempt:
                await asyncio.sleep(RETRY_S)
            try:
                read = await read_kernel(self.shells[node])
            except NodeError as exc:
                self._say_unreadable(node, exc, info, hinted)
                return
            found = since(read.findings, self._since())
            kill = killed(found, container)
            if kill is not None:
                break
        if info.container_id != container or info.state != "failed":
            return  # restarted (or stopped) meanwhile: this verdict is of a container gone
        if kill is not None:
            self._killed(info, kill)
        elif hinted:
            docker = " and Docker says OOMKilled" if oom_hint else ""
            self.board.notice("warning", f"rank {info.rank} ({node}): exit code "
                                         f"{info.exit_code}{docker}, "
                                         "but the kernel's messages since the run started name no "
                                         "out-of-memory kill of its container")
        for f in node_level(found)[-SAID_AT_MOST:]:
            if self.board.run is not None:
                self.board.run.event(KERNEL_EVENT, rank=info.rank, node=node, finding=f.to_json())
            self.board.notice("warning", f"rank {info.rank} ({node}) failed; the node's kernel "
                                         f"said: {f.sentence}")

    def _killed(self, info: RankInfo, kill: KernelFinding) -> None:
        name = self.board.plan.ranks[info.rank].container.name
        cause = Cause("oom_killed", info.exit_code, text=oom_text(kill, name, info.exit_code))
        board = self.board
        if board.run is not None:
            board.run.event(OOM_EVENT, rank=info.rank, node=info.node.name,
                            container_id=info.container_id, detail=cause.text, at=kill.at,
                            clock=kill.clock, process=kill.process, pid=kill.pid,
                            line=kill.text)
        if info.cause is not None and info.cause.code == "group_fell":
            # named as fallen with another rank: the kernel's kill is what it had before
            cause = Cause("group_fell", rank=info.cause.rank, before=cause)
        if info.rank in board.own:
            board.own[info.rank] = (board.own[info.rank][0], cause)
        board.set_state(info, "failed", cause)
        board.notice("error", f"rank {info.rank} ({info.node.name}): {cause.sentence}")

    def _say_unreadable(self, node: str, exc: NodeError, info: RankInfo, hinted: bool) -> None:
        key = (self.board.run.id if self.board.run is not None else "", node)
        if key in self._unreadable:
            return
        self._unreadable.add(key)
        head = f"rank {info.rank} failed (exit code {info.exit_code}); " if hinted else ""
        self.board.notice("warning", f"{head}{exc}")

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


DOCTOR_WINDOW_S = 3600.0
DOCTOR_SAID = 5


async def doctor_findings(shell: NodeShell, now: float | None = None) -> list[Finding]:
    """``doctor``'s lines for a node's kernel: its out-of-memory kills and GPU and PCIe errors
    of the last hour (the newest few, each a warning), none (passed), or why they cannot be
    read (a warning: the check is blind, not failed)."""
    node = shell.node.name
    try:
        read = await read_kernel(shell)
    except NodeError as exc:
        return [Finding(node, "kernel", "warned", exc.reason)]
    found = since(read.findings, (time.time() if now is None else now) - DOCTOR_WINDOW_S)
    if not found:
        return [Finding(node, "kernel", "passed", "no out-of-memory kill, NVRM/Xid or AER error "
                                                  f"in the last hour ({read.source})")]
    head = [Finding(node, "kernel", "warned", f"{len(found)} kernel message(s) that matter in "
                                              f"the last hour ({read.source}); the newest:")]
    return head + [Finding(node, "kernel", "warned", _doctor_line(f)) for f in found[-DOCTOR_SAID:]]


def _doctor_line(f: KernelFinding) -> str:
    if f.kind == "oom_kill" and f.container is not None:
        return f"{f.sentence}, container {f.container[:12]}"
    return f.sentence
