"""The ``local`` kind: every node is this machine and every rank a local process
(``processes.LocalRuntime``); commands run here without a shell, no image is involved."""

from __future__ import annotations

import sys
from pathlib import Path

from sparktui.backend.doctor import Finding
from sparktui.backend.nodeshell import LocalShell, NodeShell
from sparktui.backend.runtime import Containers
from sparktui.backend.runtimes.processes import LocalRuntime
from sparktui.backend.runtimes.shells import ShellRuntime
from sparktui.core.cluster import Cluster, Node
from sparktui.core.kinds import LOCAL, kind_of


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
