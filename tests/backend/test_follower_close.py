"""Closing the log follower while a restart drains one of its ranks (found by the console fuzz:
"dictionary changed size during iteration"), and a follow asked for after the close."""

from __future__ import annotations

import asyncio

from sparktui.backend.board import Board
from sparktui.backend.follower import LogFollower
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import RECIPES


async def test_close_while_a_rank_is_drained_and_no_follow_after() -> None:
    cluster = local_cluster(4)
    plan = build_plan(load_recipe(RECIPES / "demo-tp4" / "recipe.toml"), cluster)
    board = Board(plan, [cluster.nodes[r.rank] for r in plan.ranks], lambda e: None)
    follower = LogFollower(board, {})
    ended: list[int] = []

    async def following(rank: int) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            ended.append(rank)
            if rank == 0:  # as a restart under way: another rank's follower drained meanwhile
                await follower.drain(board.ranks[2], timeout=0.1)

    for rank in range(4):
        follower.tasks[rank] = asyncio.create_task(following(rank))
    await asyncio.sleep(0)
    await follower.close()
    assert sorted(ended) == [0, 1, 2, 3] and follower.tasks == {}
    info = board.ranks[1]
    info.container_id = "c1"
    follower.follow(info)  # closed: nothing started
    assert follower.tasks == {}
