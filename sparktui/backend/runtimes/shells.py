"""What the runtimes that reach each node through a ``NodeShell`` share: commands, probes, the
staging agent and telemetry all go through the node's shell (SSH, or this machine)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from sparktui.backend.events import NodeTelemetry
from sparktui.backend.http import Opener
from sparktui.backend.nodeshell import NodeShell
from sparktui.backend.staging import agent_argv
from sparktui.backend.telemetry import Sampler
from sparktui.core.cluster import Node
from sparktui.core.kinds import Kind
from sparktui.core.plan import Plan


class ShellRuntime:
    """``NodeExec``, ``NodeProbe``, ``Stage`` and ``Telemetry`` over one shell per node; the
    kinds built on it add their ranks (``containers``) and what else they can do."""

    agent_python = "python3"
    """The node's Python that runs the staging agent."""

    def __init__(self, kind: Kind, shells: dict[str, NodeShell]) -> None:
        self.kind = kind
        self.shells = shells

    def shell(self, node: str) -> NodeShell:
        return self.shells[node]

    async def connect(self, node: str) -> None:
        await self.shells[node].connect()

    def describe(self, node: str) -> str:
        return self.shells[node].describe()

    def opener(self, node: str) -> Opener:
        return self.shells[node].open_connection

    def shown_host(self, node: str) -> str:
        return self.shells[node].shown_host

    async def run_agent(self, node: str, spec: dict[str, Any], on_line: Callable[[str], None],
                        stdin: str) -> int:
        return await self.shells[node].stream(agent_argv(spec, self.agent_python), on_line,
                                              stdin=stdin)

    def sampler(self, plan: Plan, nodes: list[Node], emit: Callable[[NodeTelemetry], None], *,
                interval: float, low_memory: int) -> Sampler:
        return Sampler(plan, nodes, self.shells, emit, interval=interval, low_memory=low_memory)

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.shells.values()), return_exceptions=True)
