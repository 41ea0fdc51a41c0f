"""The fit check on every node at once (``core.memfit``): the snapshot's headers, the node's
memory and its GPUs, read through the node's shell, then judged per node.

On each node two commands run at once over the connection already held: the snapshot listing
(one fixed program, ``core.memfit.listing_argv``) and the telemetry sample (``core.telemetry``:
``MemTotal``, ``MemAvailable`` and nvidia-smi's GPUs, or none).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from sparktui.backend.nodeshell import NodeError, NodeShell
from sparktui.backend.together import together
from sparktui.core.cluster import Node
from sparktui.core.engines import engine
from sparktui.core.engines.argv import table_for
from sparktui.core.memfit import (
    NodeFit,
    Snapshot,
    WeightsUnreadable,
    fraction_default,
    judge,
    listing_argv,
    memory_fraction,
    parse_listing,
    repo_folder,
    unknown,
)
from sparktui.core.meminfo import NodeMemory
from sparktui.core.plan import Plan, hosted_tp_ranks
from sparktui.core.recipe import Recipe
from sparktui.core.telemetry import NodeSample, parse_sample, sample_argv

LISTING_TIMEOUT_S = 60.0
"""A snapshot on a network share (the seed's NAS) answers slowly: a header a file."""

T = TypeVar("T")


async def _or_reason(job: Awaitable[T]) -> T | str:
    """What ``job`` gives, or the node's reason why it could not."""
    try:
        return await job
    except NodeError as exc:
        return exc.reason


async def read_snapshot(shell: NodeShell, folder: str, python: str = "python3") -> Snapshot | str:
    """The node's snapshot of the repo at ``folder`` with its files' weights, or why it cannot
    be read (a sentence)."""
    try:
        res = await shell.run(listing_argv(folder, python), timeout=LISTING_TIMEOUT_S)
    except NodeError as exc:
        return f"its weights could not be listed: {exc.reason}"
    if not res.ok:  # no python3, or it stopped part way: what it listed may be short
        why = (res.stderr.strip().splitlines() or [f"{python} exited with code {res.returncode}"])[-1]
        return f"its weights could not be listed: {why[:200]}"
    try:
        return parse_listing(res.stdout)
    except WeightsUnreadable as exc:
        return f"a header unreadable: {exc}"


async def _sample(shell: NodeShell) -> NodeSample:
    res = await shell.run(sample_argv([]), timeout=20)
    return parse_sample(res.stdout, [])


async def check_fit(recipe: Recipe, plan: Plan, nodes: list[Node], shells: dict[str, NodeShell],
                    python: str = "python3") -> list[NodeFit]:
    """A verdict per rank's node, every node at once; never raises for a node's sake."""
    spec = recipe.spec
    rules = engine(spec.engine)
    default = fraction_default(spec.engine, rules.memory_fraction.dest, spec.engine_flags)
    table = table_for(spec.engine, spec.engine_flags, spec.entrypoint)  # as the lint reads args
    world, tp = len(plan.ranks), spec.tensor_parallel_size
    by_name = {n.name: n for n in nodes}

    async def one(rank: int) -> NodeFit:
        node = by_name[plan.ranks[rank].node]
        shell = shells.get(node.name)
        if shell is None:
            return unknown(node.name, f"the {plan.cluster_kind} runtime reaches no shell on the "
                                      "node before the launch")
        folder = repo_folder(node.hf_cache, plan.model)
        if folder is None:
            return unknown(node.name, f"model {plan.model[:100]!r} is no Hugging Face repo id: "
                                      "its weights are not looked for")
        listing = asyncio.ensure_future(read_snapshot(shell, folder, python))
        sampling = asyncio.ensure_future(_or_reason(_sample(shell)))
        await together(listing, sampling)
        snapshot, sample = listing.result(), sampling.result()
        if isinstance(snapshot, str):
            return unknown(node.name, snapshot)
        if isinstance(sample, str):
            return unknown(node.name, f"its memory and GPUs could not be read: {sample}")
        if not sample.mem_total:
            return unknown(node.name, "its memory could not be read: no MemTotal in /proc/meminfo")
        memory = NodeMemory(sample.mem_total, sample.mem_available)
        fraction = memory_fraction(spec.engine, rules.memory_fraction,
                                   plan.ranks[rank].container.command, default, table)
        return judge(node.name, snapshot, tp, len(hosted_tp_ranks(rank, world, tp)), fraction,
                     memory, sample)

    return list(await together(*(one(r) for r in range(world))))
