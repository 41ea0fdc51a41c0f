"""The ``ssh`` kind: each node reached over one SSH connection (its shell, ``nodeshell``), its
ranks run as containers of the node's own Docker engine through a tunnel on that connection."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sparktui.backend.doctor import Finding
from sparktui.backend.events import Event
from sparktui.backend.imagesync import DockerUrl, SyncReport, sync_image
from sparktui.backend.memwait import node_leftovers
from sparktui.backend.nodeshell import NodeShell, SshShell
from sparktui.backend.runtime import Containers, RuntimeLost
from sparktui.backend.runtimes.base import OldProcesses
from sparktui.backend.runtimes.docker import DockerRuntime, preflight
from sparktui.backend.runtimes.shells import ShellRuntime
from sparktui.backend.runtimes.tunnel import DockerTunnel
from sparktui.core.cluster import Cluster, Node
from sparktui.core.kinds import SSH, kind_of
from sparktui.core.procs import Proc, inner_pid


class SshDocker(ShellRuntime):
    """SSH shells, Docker tunnels and one ``DockerRuntime`` per node of the recipe's ranks."""

    def __init__(self, cluster: Cluster, nodes: list[Node], state_root: Path) -> None:
        ssh = {n.name: SshShell(n) for n in nodes}
        shells: dict[str, NodeShell] = dict(ssh)
        super().__init__(kind_of(SSH), shells)
        self.cluster = cluster
        self.tunnels = {name: DockerTunnel(shell) for name, shell in ssh.items()}
        self.ranks = {name: DockerRuntime(name, t.url) for name, t in self.tunnels.items()}
        self._inner: dict[tuple[str, int], int] = {}  # (container, node's pid) -> container's pid

    def containers(self, node: str) -> Containers:
        return self.ranks[node]

    async def retire(self, node: str, container_id: str, timeout: float) -> None:
        await self.ranks[node].stop(container_id, timeout=timeout)

    async def image_id(self, node: str, image: str) -> str | None:
        return await self.ranks[node].image_id(image)

    async def sync_image(self, image: str, order: list[str], emit: Callable[[Event], None],
                         source: str | None) -> SyncReport:
        """``imagesync.sync_image`` over the tunnels; a ``source`` node of the cluster that
        runs no rank of the recipe is connected for the copy, then closed."""
        urls: dict[str, DockerUrl] = {name: t.url for name, t in self.tunnels.items()}
        extra = [n for n in self.cluster.nodes if n.name == source and n.name not in urls]
        opened = [(SshShell(n), n.name) for n in extra]
        tunnels = [(DockerTunnel(shell), shell, name) for shell, name in opened]
        for tunnel, _shell, name in tunnels:
            urls[name] = tunnel.url
        try:
            return await sync_image(image, order, urls, emit, source)
        finally:
            for tunnel, shell, _name in tunnels:
                await tunnel.close()
                await shell.close()

    async def preflight(self, node: Node, image: str, slug: str) -> tuple[list[Finding], str | None]:
        return await preflight(self.ranks[node.name], node, image, slug)

    # -- Processes: Docker's top and exec through the tunnel; the node's /proc through its shell
    async def processes(self, node: str, container_id: str) -> list[Proc]:
        return await self.ranks[node].top(container_id)

    async def container_pid(self, node: str, container_id: str, pid: int) -> int | None:
        """The ``NSpid`` of the node's ``/proc/<pid>/status`` (readable by any user): Docker's
        top lists the node's pids, ``docker exec`` needs the container's. Kept once known: a
        command over SSH is a login shell on the node (0.24 s of a 0.4 s dump on the test
        cluster), and the engine watch asks it when it first sees an engine, ahead of a dump."""
        known = self._inner.get((container_id, pid))
        if known is not None:
            return known
        res = await self.shells[node].run(["cat", f"/proc/{int(pid)}/status"], timeout=10)
        inner = inner_pid(res.stdout) if res.ok else None
        if inner is not None:
            self._inner[(container_id, pid)] = inner
        return inner

    async def exec(self, node: str, container_id: str, argv: list[str],
                   timeout: float) -> tuple[int, str]:
        return await self.ranks[node].exec(container_id, argv, timeout)

    async def send_signal(self, node: str, container_id: str, pid: int, signal: str) -> None:
        """Sent from inside the container (as its root; the operator's SSH user may not signal
        it from the node): the shell's own ``kill``, which every engine image's ``sh`` has."""
        inner = await self.container_pid(node, container_id, pid)
        if inner is None:
            raise RuntimeLost(f"{node}: process {pid} is gone")
        name = signal.removeprefix("SIG")
        if not name.isalnum():
            raise ValueError(f"not a signal name: {signal!r}")
        code, output = await self.exec(node, container_id,
                                       ["sh", "-c", f"kill -s {name} {int(inner)}"], timeout=10)
        if code != 0:
            raise RuntimeLost(f"{node}: kill -s {name} {inner} in the container: {output.strip()}")

    # -- Leftovers: the node's processes whose cgroup names the old container
    async def remember(self, node: str, container_id: str) -> OldProcesses:
        shell = self.shells[node]
        return lambda: node_leftovers(shell, container_id)

    async def close(self) -> None:
        for tunnel in self.tunnels.values():
            await tunnel.close()
        await super().close()
