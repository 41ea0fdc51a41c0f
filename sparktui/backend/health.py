"""Health probes: ``/health`` on every rank, and on the head ``/v1/models`` naming the served
model (an engine that answers before its model is loaded is not ready)."""

from __future__ import annotations

import asyncio

from sparktui.backend.board import Board
from sparktui.backend.http import request
from sparktui.core.ranks import BOOTING, RankInfo

INTERVAL_S = 2.0
INTERVAL_BOOTING_S = 0.5  # a booting rank is probed often: ready is reported promptly
TIMEOUT_S = 2.0


class HealthProber:
    def __init__(self, board: Board) -> None:
        self.board = board
        self.closed = False

    @staticmethod
    def host(info: RankInfo) -> str:
        return "127.0.0.1" if info.node.local else info.node.host

    async def probe(self, info: RankInfo) -> int | None:
        """The rank's health code; None when nothing answers."""
        plan = self.board.plan
        port = plan.ranks[info.rank].port
        try:
            res = await request(self.host(info), port, "/health", timeout=TIMEOUT_S)
            if info.rank != 0 or res.status != 200:
                return res.status
            models = await request(self.host(info), port, "/v1/models", timeout=TIMEOUT_S)
        except (OSError, asyncio.TimeoutError):
            return None
        if models.status != 200 or plan.served_model_name.encode() not in models.body:
            return 503
        return 200

    async def probe_all(self) -> None:
        ranks = self.board.ranks
        codes = await asyncio.gather(*(self.probe(i) for i in ranks))
        for info, code in zip(ranks, codes, strict=True):
            self.board.set_health(info, code)

    async def loop(self) -> None:
        while not self.closed:
            await self.probe_all()
            booting = any(r.state in BOOTING for r in self.board.ranks)
            await asyncio.sleep(INTERVAL_BOOTING_S if booting else INTERVAL_S)
