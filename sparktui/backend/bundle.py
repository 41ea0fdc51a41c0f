"""What a bundle asks of the cluster and of a run, beside the run's files: each node's facts now
(doctor's checks and what an engine developer asks for: kernel, driver, nvidia-smi, memory), or
why they could not be had, and the run's check verdicts as ``status`` computes them.

A bundle is made for a failed run, whose nodes may be down: a node that does not answer gets a
sentence, never a wait past ``NODE_S`` nor an error that stops the bundle.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sparktui.backend.board import Board
from sparktui.backend.doctor import check_node
from sparktui.backend.findings import Finding
from sparktui.backend.follower import LogFollower
from sparktui.backend.nodeshell import NodeError
from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.runtimes.base import NodeExec
from sparktui.backend.together import together
from sparktui.core.checks import BootChecks
from sparktui.core.runstore import Run

NODE_S = 45.0
"""The most a node's facts may take (doctor's checks and the facts script, each command with its
own 20 s): a node whose SSH hangs is named, the bundle goes on."""
FACTS_S = 20.0

FACTS = r"""
section() { printf '\n## %s\n' "$1"; }
section kernel; uname -a 2>&1
section os; (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || echo "no /etc/os-release"
section uptime; cat /proc/uptime 2>&1
section memory; cat /proc/meminfo 2>&1
section "nvidia driver"; cat /proc/driver/nvidia/version 2>/dev/null || echo "no /proc/driver/nvidia/version"
section nvidia-smi
if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi 2>&1; nvidia-smi -q 2>&1 | head -n 400
else echo "no nvidia-smi on this node"; fi
section docker
if command -v docker >/dev/null 2>&1; then docker version 2>&1 | head -n 40; docker info 2>&1 | head -n 60
else echo "no docker command in this node's shell"; fi
"""
"""Read-only commands on the node; their outputs are sections of its file in the bundle."""


@dataclass
class NodeFacts:
    """One node at bundle time: doctor's findings, the facts script's output, and why a part is
    missing (the node unreachable, the kind runs no commands on its nodes)."""

    node: str
    findings: list[Finding]
    facts: str
    missing: list[str]

    def text(self) -> str:
        lines = [f"# node {self.node}", "", "## doctor"]
        lines += [f"{f.verdict:7} {f.check}: {f.sentence}" for f in self.findings] or ["(none)"]
        if self.missing:
            lines += ["", "## not gathered", *self.missing]
        if self.facts:
            lines.append(self.facts.rstrip())
        return "\n".join(lines) + "\n"


async def node_facts(orch: Orchestrator, rank: int, unreachable: str | None) -> NodeFacts:
    """The node of ``rank``: doctor's checks and the facts script; ``unreachable``: why its
    connection failed (nothing is asked of it then)."""
    node = orch.nodes[rank]
    if unreachable is not None:
        return NodeFacts(node.name, [], "", [f"the node did not answer: {unreachable}"])
    try:
        return await asyncio.wait_for(_gather(orch, rank), NODE_S)
    except asyncio.TimeoutError:
        return NodeFacts(node.name, [], "", [f"the node did not answer within {NODE_S:g} s"])


async def _gather(orch: Orchestrator, rank: int) -> NodeFacts:
    node = orch.nodes[rank]
    findings, _image = await check_node(node, orch.runtime, orch.plan, rank)
    missing: list[str] = []
    facts = ""
    rt = orch.runtime
    if not isinstance(rt, NodeExec):
        missing.append(f"kernel, driver and memory: the {orch.cluster.kind} runtime runs no "
                       "commands on its nodes")
    elif any(f.check == "ssh" and f.verdict == "failed" for f in findings):
        missing.append("kernel, driver and memory: the node's shell could not be reached")
    else:
        try:
            res = await rt.shell(node.name).run(["sh", "-c", FACTS], timeout=FACTS_S)
            facts = res.stdout + (f"\n## stderr\n{res.stderr}" if res.stderr.strip() else "")
        except NodeError as exc:
            missing.append(f"kernel, driver and memory: {exc.reason}")
    return NodeFacts(node.name, findings, facts, missing)


async def all_node_facts(orch: Orchestrator, unreachable: dict[str, str]) -> list[NodeFacts]:
    """Every node of the plan at once."""
    return list(await together(*(node_facts(orch, r.rank, unreachable.get(r.node))
                                       for r in orch.plan.ranks)))


async def run_checks(orch: Orchestrator, run: Run) -> BootChecks:
    """``run``'s check verdicts: the attached run's as ``status`` has them; another run's (an
    earlier one, or one whose containers are gone) replayed over its files, as an attach
    replays them, its ended boots finished from its events."""
    if orch.run is not None and orch.run.id == run.id:
        return orch.checks
    board = Board(orch.plan, orch.nodes, lambda _event: None)
    board.run = run
    run.redactor = board.redactor
    await LogFollower(board, {}).replay_checks(run)
    return board.checks
