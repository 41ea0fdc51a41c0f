"""One recipe opened on its cluster: the plan, the Orchestrator and the lines already captured.

The console keeps one session at a time; switching recipes closes the old one (its containers
keep running, as on quit).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.watchdog import Watchdog
from sparktui.catalog import RecipeInfo
from sparktui.config import cluster_plan
from sparktui.core.plan import Plan
from sparktui.core.runstore import Run
from sparktui.ui.bridge import EventBridge
from sparktui.ui.logstore import LogLine, read_tail


class Session:
    """``SetupError`` when the cluster's plan key cannot be used (``config.cluster_plan``)."""

    def __init__(self, info: RecipeInfo, state_root: Path, bridge: EventBridge,
                 health_interval: float | None = None) -> None:
        assert info.recipe is not None and info.cluster is not None
        self.info = info
        self.plan: Plan = cluster_plan(info.recipe, info.cluster, state_root)
        self.orch = Orchestrator(info.recipe, info.cluster, self.plan, state_root=state_root,
                                 on_event=bridge, health_interval=health_interval)
        self.orch.who = "the console"
        self.bridge = bridge
        policy = info.recipe.spec.restart
        self.watchdog = Watchdog(self.orch, policy) if policy.policy == "group" else None
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

    async def open(self, window: int) -> tuple[Run | None, dict[int, list[LogLine]]]:
        """Connect to every node, find the recipe's containers and read what their run's files
        hold; following starts after, so no line is missed or read twice."""
        self.unreachable = await self.orch.connect()
        # with a watchdog, a group restart cut short (no container left) is this console's to
        # finish, as the watch's (the chaos soak: a console killed mid-restart opened on
        # "nothing running" and the group stayed down)
        self.attached = await self.orch.attach(follow=False, finish=self.watchdog is not None)
        if self.watchdog is not None:
            self.watchdog.start()  # acts while this console follows the run
        tails: dict[int, list[LogLine]] = {}
        run = self.orch.run
        if run is not None:
            for rank in range(self.world):
                tails[rank] = await asyncio.to_thread(read_tail, run, rank, window)
        return run, tails

    def follow(self) -> None:
        if self.attached and not self.closed:
            self.orch.start_following()

    async def close(self) -> None:
        """Stop following; containers keep running."""
        if not self.closed:
            self.closed = True
            self.bridge.closed = True  # nothing of this session paints over the next one
            if self.watchdog is not None:
                await self.watchdog.close()
            await self.orch.close()
