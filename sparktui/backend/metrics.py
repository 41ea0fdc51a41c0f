"""The engines' own numbers: every rank that serves them scraped at ``[metrics] interval``.

A scrape is a ``GET`` of the adapter's metrics path (``/metrics``) sent from the rank's own node
through its SSH connection, as the health probes are (``health.PROBE_HOST`` on the node): an API
port firewalled from the operator's machine answers there. The body is parsed by the core
(``core.metrics``, the Prometheus client's parser) into the rank's ``Pulse``; a failed or
malformed scrape leaves the last values and says why (stale). A rank that stops running is
stale with its state, and starts over when it runs again (its counters were reset).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Mapping

from sparktui.backend.board import Board
from sparktui.backend.events import MetricsChanged
from sparktui.backend.health import PROBE_HOST
from sparktui.backend.http import Opener, request
from sparktui.backend.together import together
from sparktui.core.engines import engine
from sparktui.core.metrics import (
    MetricsUnreadable,
    Pulse,
    PulseKey,
    Scrape,
    group_values,
    parse_exposition,
)
from sparktui.core.ranks import RUNNING, RankInfo

HISTORY = 120
"""Readings kept for a sparkline: ten minutes at the default 5 s."""
TIMEOUT_S = 3.0
"""A scrape's budget (a vLLM body is some 100 KB, through the SSH channel)."""


class MetricsScraper:
    def __init__(self, board: Board, openers: Mapping[str, Opener], interval: float | None) -> None:
        """``interval``: seconds between two scrapes of a rank (None: off, nothing is sent)."""
        self.board = board
        self.openers = openers
        self.interval = interval
        plan = board.plan
        rules = engine(plan.engine)
        self.spec = rules.metrics
        self.ranks = [r.rank for r in plan.ranks
                      if r.serves_http and rules.serves_metrics(r.rank, plan.world,
                                                                 plan.distributed_backend)]
        """The ranks whose engine serves metrics (SGLang's head, vLLM's API ranks)."""
        self.pulses: dict[int, Pulse] = {}
        self.last: dict[int, Scrape] = {}
        """Each rank's last good scrape (what ``watch --metrics`` serves again, relabelled)."""
        self._starts: dict[int, tuple[str | None, int]] = {}  # rank -> the launch of its pulse
        self._group: dict[PulseKey, deque[float]] = {}  # the group's values, a round each
        self.closed = False

    def scraped(self, info: RankInfo) -> bool:
        return (info.rank in self.ranks and info.state in RUNNING and not info.removed
                and info.node.name in self.openers)

    def pulse(self, info: RankInfo) -> Pulse:
        """The rank's pulse; a new one after a restart (the engine's counters began again, and
        a rate across two engines would be a lie)."""
        start = (info.container_id, info.restarts)
        if info.rank not in self.pulses or self._starts.get(info.rank) != start:
            self.pulses[info.rank] = Pulse(self.spec)
            self.last.pop(info.rank, None)
            self._starts[info.rank] = start
        return self.pulses[info.rank]

    def group(self) -> dict[PulseKey, float | None]:
        return group_values([self.pulses[r] for r in sorted(self.pulses)])

    def group_history(self) -> dict[PulseKey, list[float]]:
        """The group's values, one a round, oldest first (its sparklines)."""
        return {k: list(v) for k, v in self._group.items()}

    async def scrape(self, info: RankInfo) -> None:
        """One scrape of one rank into its pulse, and the news of it."""
        pulse = self.pulse(info)
        port = self.board.plan.ranks[info.rank].port
        now = time.monotonic()
        try:
            res = await request(PROBE_HOST, port, self.spec.path, timeout=TIMEOUT_S,
                                opener=self.openers[info.node.name])
        except asyncio.TimeoutError:
            pulse.fail(f"GET {self.spec.path} timed out after {TIMEOUT_S:g} s", now)
        except ConnectionRefusedError:
            pulse.fail(f"GET {self.spec.path}: connection refused", now)
        except OSError as exc:
            pulse.fail(f"GET {self.spec.path}: {exc.strerror or exc}", now)
        else:
            if res.status != 200:
                hint = (f" (the engine serves none without {self.spec.flag})"
                        if self.spec.flag and res.status == 404 else "")
                pulse.fail(f"GET {self.spec.path} answered {res.status}{hint}", now)
            else:
                try:
                    scrape = parse_exposition(res.body.decode(errors="replace"), now, self.spec)
                except MetricsUnreadable as exc:
                    pulse.fail(f"GET {self.spec.path}: {exc}", now)
                else:
                    pulse.add(scrape)
                    self.last[info.rank] = scrape
        self._said(info.rank, pulse)

    def _said(self, rank: int, pulse: Pulse) -> None:
        why = pulse.stale
        self.board.emit(MetricsChanged(rank, pulse.values(), self.board.redactor.text(why)
                                       if why else None, pulse.last_ok))

    def _gone(self, info: RankInfo) -> None:
        """A rank that had a pulse and no longer runs: stale, once, with its state."""
        pulse = self.pulses.get(info.rank)
        if pulse is None or (pulse.stale or "").startswith("not running"):
            return
        pulse.fail(f"not running ({info.state})", time.monotonic())
        self._said(info.rank, pulse)

    async def scrape_all(self) -> None:
        """Every rank that serves metrics once, now; a rank gone since is marked stale."""
        todo = []
        for info in self.board.ranks:
            if self.scraped(info):
                todo.append(info)
            elif info.rank in self.ranks:
                self._gone(info)
        await together(*(self.scrape(i) for i in todo))
        for key, value in self.group().items():
            if value is not None:
                self._group.setdefault(key, deque(maxlen=HISTORY)).append(value)

    async def loop(self) -> None:
        """A round every ``interval`` (from one round's start to the next's)."""
        if self.interval is None:
            return
        while not self.closed:
            started = time.monotonic()
            await self.scrape_all()
            await asyncio.sleep(max(0.05, started + self.interval - time.monotonic()))
