"""One recipe opened on its cluster: the plan, the Orchestrator and the lines already captured.

The console keeps one session at a time; switching recipes closes the old one (its containers
keep running, as on quit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from sparktui.backend.events import Event
from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.plan import Plan, build_plan
from sparktui.ui.catalog import RecipeInfo
from sparktui.ui.logstore import LogLine, read_tail


class Session:
    def __init__(self, info: RecipeInfo, state_root: Path, listener: Callable[[Event], None]) -> None:
        assert info.recipe is not None and info.cluster is not None
        self.info = info
        self.plan: Plan = build_plan(info.recipe, info.cluster)
        self.orch = Orchestrator(info.recipe, info.cluster, self.plan, state_root=state_root,
                                 on_event=listener)
        self.unreachable: dict[str, str] = {}
        self.attached = False
        self.closed = False

    @property
    def slug(self) -> str:
        return self.info.slug

    @property
    def world(self) -> int:
        return self.plan.world

    @property
    def tp(self) -> int:
        assert self.info.recipe is not None
        return self.info.recipe.spec.tensor_parallel_size

    @property
    def run_id(self) -> str | None:
        return self.orch.run.id if self.orch.run is not None else None

    async def open(self, window: int) -> dict[int, list[LogLine]]:
        """Connect to every node, find the recipe's containers and read what their run's files
        hold; following starts after, so no line is missed or read twice."""
        self.unreachable = await self.orch.connect()
        self.attached = await self.orch.attach(follow=False)
        tails: dict[int, list[LogLine]] = {}
        run = self.orch.run
        if run is not None:
            for info in self.orch.ranks:
                tails[info.rank] = await asyncio.to_thread(read_tail, run, info.rank, window)
        return tails

    def follow(self) -> None:
        if self.attached and not self.closed:
            self.orch.start_following()

    async def close(self) -> None:
        """Stop following; containers keep running."""
        if not self.closed:
            self.closed = True
            await self.orch.close()
