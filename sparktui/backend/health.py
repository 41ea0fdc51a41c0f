"""Health probes: what the engine's adapter lists for a rank (``/health`` everywhere, and on an
API rank ``/v1/models`` naming the served model: an engine that answers before its model is
loaded is not ready), and their loop.

A probe is sent from the rank's own node, through that node's SSH connection (a TCP channel
opened on the node to ``127.0.0.1:<port>``; the local cluster connects directly): an engine's
port need not be open to the operator's machine, and an engine bound to ``0.0.0.0`` or to the
node's loopback answers there alike.

Rate: a booting rank every ``HEALTH_BOOTING_S``, a ready one every ``interval`` (``[health]
interval``, 10 s by default) and only its first probe, once it answered 200 (before, at the
booting rate): each request is a line in the engine's access log. A rank's ready line
(``Board.probe_soon``) gets the booting ranks probed at once, then every ``SOON_S`` for
``SOON_WINDOW_S``: an SGLang worker is ready by its ``/health`` once rank 0's line appeared, and
waiting for the next 1 s tick put up to a second between the last ready line and ready
(docs/benchmarks.md, launch). A rank that does not run (failed, stopped, restarting, not
launched) or opens no port (a headless worker) is not probed and shows no code.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping

from sparktui.backend.board import Board
from sparktui.backend.http import Opener, request
from sparktui.backend.together import together
from sparktui.core.cluster import HEALTH_BOOTING_S, HEALTH_INTERVAL_S
from sparktui.core.engines import engine
from sparktui.core.ranks import RUNNING, RankInfo
from sparktui.core.timing import mark

TIMEOUT_S = 2.0
SOON_S = 0.1  # after a ready line: how often a booting rank is probed ...
SOON_WINDOW_S = 2.0  # ... for this long (at most 20 more access-log lines per rank)
PROBE_HOST = "127.0.0.1"
"""The engine's address as its own node sees it."""


class HealthProber:
    def __init__(self, board: Board, openers: Mapping[str, Opener], *,
                 interval: float = HEALTH_INTERVAL_S) -> None:
        """``openers``: per node, connections opened as the node sees the network (the
        runtime's ``NodeProbe``); a rank on a node without one is never probed."""
        self.board = board
        self.openers = openers
        self.interval = interval  # seconds between two probes of a ready rank
        self.closed = False
        self._last: dict[int, float] = {}  # rank -> time.monotonic() of its last probe
        self._soon_until = 0.0  # booting ranks are probed every SOON_S until then

    def probed(self, info: RankInfo) -> bool:
        """Whether the rank has an engine that may answer: running, and opening a port."""
        return (info.state in RUNNING and not info.removed
                and self.board.plan.ranks[info.rank].serves_http and info.node.name in self.openers)

    async def probe(self, info: RankInfo) -> int | None:
        """The rank's health code; None when nothing answers or the rank is not probed."""
        if not self.probed(info):
            return None
        plan = self.board.plan
        port = plan.ranks[info.rank].port
        probes = engine(plan.engine).probes(info.rank)
        if info.state in ("ready", "wedged"):
            probes = probes[:1]  # readiness is settled: one request says the engine still answers
        opener = self.openers[info.node.name]
        try:
            for p in probes:
                res = await request(PROBE_HOST, port, p.path, timeout=TIMEOUT_S, opener=opener)
                if res.status != 200:
                    return res.status
                if p.names_model and plan.served_model_name.encode() not in res.body:
                    return 503
        except (OSError, asyncio.TimeoutError):  # refused, or the SSH link is gone: try again later
            return None
        return 200

    async def probe_ranks(self, ranks: list[RankInfo]) -> None:
        if ranks:
            mark(f"probe: ranks {[i.rank for i in ranks]}")
        codes = await together(*(self.probe(i) for i in ranks))
        for info, code in zip(ranks, codes, strict=True):
            mark(f"probe: rank {info.rank} answered {code}")
            self.board.set_health(info, code)

    async def probe_all(self) -> None:
        """Every rank once, now (a status without a live loop)."""
        await self.probe_ranks(list(self.board.ranks))

    def period(self, info: RankInfo) -> float:
        """A ready rank whose last answer was not 200 (a head made ready by its ready line while
        its last probe, from booting, said 503) is asked again at the booting rate: the code
        beside "ready" is what the engine says now, not a stale 503 for a whole interval."""
        if info.state in ("ready", "wedged") and info.health == 200:
            return self.interval
        return SOON_S if time.monotonic() < self._soon_until else HEALTH_BOOTING_S

    def _take_ready_line(self) -> None:
        """A ready line appeared since the last round: every booting rank is due now."""
        if not self.board.probe_soon.is_set():
            return
        self.board.probe_soon.clear()
        self._soon_until = time.monotonic() + SOON_WINDOW_S
        for info in self.board.ranks:
            if info.state not in ("ready", "wedged"):
                self._last.pop(info.rank, None)

    def due(self, now: float) -> list[RankInfo]:
        """The ranks to probe now; a rank that is not probed loses any code it still shows."""
        out = []
        for info in self.board.ranks:
            if not self.probed(info):
                self._last.pop(info.rank, None)
                if info.health is not None:
                    self.board.set_health(info, None)
            elif now - self._last.get(info.rank, -1e9) >= self.period(info):
                self._last[info.rank] = now
                out.append(info)
        return out

    async def loop(self) -> None:
        """Probe what is due, then sleep until the next rank is, at most ``HEALTH_BOOTING_S``
        (a rank that starts booting meanwhile is probed within that), or until a ready line
        appears (``Board.probe_soon``)."""
        soon = self.board.probe_soon
        while not self.closed:
            self._take_ready_line()
            await self.probe_ranks(self.due(time.monotonic()))
            wake = min((self._last[i.rank] + self.period(i) for i in self.board.ranks
                        if i.rank in self._last), default=time.monotonic() + HEALTH_BOOTING_S)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(soon.wait(),
                                       min(HEALTH_BOOTING_S, max(0.05, wake - time.monotonic())))
