"""The ``local`` kind: every node is this machine and every rank a local process
(``processes.LocalRuntime``); commands run here without a shell, no image is involved."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
import sys
from collections.abc import Iterator
from pathlib import Path

from sparktui.backend.doctor import Finding
from sparktui.backend.nodeshell import LocalShell, NodeShell
from sparktui.backend.runtime import Containers, RuntimeLost
from sparktui.backend.runtimes.base import OldProcesses
from sparktui.backend.runtimes.processes import LocalRuntime, pid_alive
from sparktui.backend.runtimes.shells import ShellRuntime
from sparktui.core.cluster import Cluster, Node
from sparktui.core.kinds import LOCAL, kind_of
from sparktui.core.memwait import rank_tree
from sparktui.core.procs import Proc, ProcStat, from_proc, proc_stat


class LocalProcesses(ShellRuntime):
    """Ranks as detached processes tracked in ``<state_root>/local``; the nodes' shells are
    this machine's, the staging agent runs on this Python."""

    agent_python = sys.executable

    def __init__(self, cluster: Cluster, nodes: list[Node], state_root: Path) -> None:
        shells: dict[str, NodeShell] = {n.name: LocalShell(n) for n in nodes}
        super().__init__(kind_of(LOCAL), shells)
        self.ranks = LocalRuntime(state_root / "local")

    def containers(self, node: str) -> Containers:
        return self.ranks

    async def retire(self, node: str, container_id: str, timeout: float) -> None:
        await self.ranks.stop(container_id, timeout=timeout)

    async def preflight(self, node: Node, image: str, slug: str) -> tuple[list[Finding], str | None]:
        return [Finding(node.name, "runtime", "passed",
                        "local cluster: ranks run as processes, no Docker needed")], None

    # -- Processes: a local rank is its process group (``local_shim`` starts it in its own)
    def _group(self, container_id: str) -> int | None:
        return self.ranks.rank_pid(container_id)

    async def processes(self, node: str, container_id: str) -> list[Proc]:
        group = self._group(container_id)
        if group is None:
            raise RuntimeLost(f"local rank {container_id} has not started")
        return await asyncio.to_thread(_group_procs, group)

    async def container_pid(self, node: str, container_id: str, pid: int) -> int | None:
        return pid if os.path.exists(f"/proc/{int(pid)}") else None

    async def exec(self, node: str, container_id: str, argv: list[str],
                   timeout: float) -> tuple[int, str]:
        """Run here, as the rank is: this machine's programs (py-spy when it is on PATH)."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT)
        except FileNotFoundError as exc:
            return 127, str(exc)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            return 124, f"{argv[0]} did not finish within {timeout:g} s"
        return proc.returncode if proc.returncode is not None else 255, out.decode("utf-8", "replace")

    async def send_signal(self, node: str, container_id: str, pid: int, signal: str) -> None:
        group = self._group(container_id)
        procs = await self.processes(node, container_id) if group is not None else []
        if pid not in {p.pid for p in procs}:  # only a process of this rank is signalled
            raise RuntimeLost(f"process {pid} is not one of local rank {container_id}'s")
        try:
            os.kill(pid, signals.Signals[signal])
        except ProcessLookupError:
            raise RuntimeLost(f"process {pid} is gone") from None


    # -- Leftovers: the rank's processes as they were before the stop, by pid and start time
    async def remember(self, node: str, container_id: str) -> OldProcesses:
        leader = self._group(container_id)
        tree = await asyncio.to_thread(_rank_tree, leader) if leader is not None else {}

        async def left() -> list[int]:
            return await asyncio.to_thread(_still_there, tree)
        return left


def _stat_lines() -> Iterator[tuple[int, str, ProcStat]]:
    """Every process of this machine: its pid, ``/proc/<pid>/stat`` and what it says."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        st = proc_stat(stat)
        if st is not None:
            yield int(entry), stat, st


def _stats() -> dict[int, ProcStat]:
    return {pid: st for pid, _stat, st in _stat_lines()}


def _rank_tree(leader: int) -> dict[int, int]:
    return rank_tree(_stats(), leader)


def _still_there(tree: dict[int, int]) -> list[int]:
    """Those of ``tree`` that still run: the same pid with the same start time, no zombie."""
    return [pid for pid, start in tree.items() if pid_alive(pid, start)]


def _group_procs(group: int) -> list[Proc]:
    """Every process of ``group``, from ``/proc``."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    for pid, stat, st in _stat_lines():
        if st.pgid != group:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:  # gone meanwhile
            continue
        proc = from_proc(pid, stat, cmdline, ticks)
        if proc is not None:
            found.append(proc)
    return sorted(found, key=lambda p: p.pid)
