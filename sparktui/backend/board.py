"""What the Orchestrator's jobs share: the ranks, the boot checks, the run, and the one way a
rank's state changes (checked by ``core.ranks``, recorded in the run, announced to listeners).

The log follower, the health prober and the boot watch each hold the Board; none of them holds
another, so each can be read (and tested) on its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Literal

from sparktui.backend.events import ChecksChanged, Event, Notice, RankChanged
from sparktui.core.checks import BootChecks, CheckUpdate
from sparktui.core.cluster import Node
from sparktui.core.plan import Plan
from sparktui.core.ranks import RankInfo, RankState, all_ready, all_settled, ready_now
from sparktui.core.runstore import Run, ts_epoch


class Board:
    def __init__(self, plan: Plan, nodes: Sequence[Node], emit: Callable[[Event], None]) -> None:
        self.plan = plan
        self.emit = emit
        self.ranks = [RankInfo(r.rank, nodes[r.rank]) for r in plan.ranks]
        self.checks = BootChecks.from_plan(plan.boot, plan.world)
        self.run: Run | None = None
        self.boot_started: float | None = None  # time.monotonic() of the last launch or restart
        self.changed = asyncio.Event()  # set on a failure or when every rank settled: wakes wait()

    def new_checks(self) -> None:
        self.checks = BootChecks.from_plan(self.plan.boot, self.plan.world)

    # -- announcing ------------------------------------------------------------------------
    def notice(self, level: Literal["info", "warning", "error"], text: str) -> None:
        if self.run is not None:
            self.run.event("notice", level=level, text=text)
        self.emit(Notice(level, text))

    def announce(self, info: RankInfo) -> None:
        self.emit(RankChanged(info.snapshot()))

    def checks_changed(self, updates: list[CheckUpdate]) -> None:
        if updates:
            self.emit(ChecksChanged(updates, self.checks.snapshot()))

    # -- state -----------------------------------------------------------------------------
    def set_state(self, info: RankInfo, state: RankState, detail: str = "",
                  when: float | None = None) -> None:
        """``when``: the epoch second the failure happened on the node (log line or exit)."""
        if not info.move(state, detail, when):
            return
        if self.run is not None:
            self.run.event("rank", rank=info.rank, state=state, detail=detail,
                           exit_code=info.exit_code, container_id=info.container_id)
        self.announce(info)
        if state == "failed" or all_settled(self.ranks):
            self.changed.set()

    def set_health(self, info: RankInfo, code: int | None) -> None:
        if code != info.health:
            info.health = code
            self.announce(info)
        self.maybe_ready(info)

    def apply_checks(self, info: RankInfo, stamps: dict[int, str] | None = None) -> None:
        """After the rank's checks changed: a fatal line fails a booting rank; the ready line
        may make it ready."""
        fatal = self.checks.fatal(info.rank)
        if fatal is not None and info.state in ("booting", "creating"):
            when = ts_epoch((stamps or {}).get(fatal.line_no))
            self.set_state(info, "failed", f"line {fatal.line_no}: {fatal.text}", when)
            return
        self.maybe_ready(info)

    def maybe_ready(self, info: RankInfo) -> None:
        if ready_now(info, line_seen=self.checks.ready_seen(info.rank),
                     head_line_seen=self.checks.ready_seen(0)):
            self.set_state(info, "ready")
            self._finish_boot_if_ready()

    def _finish_boot_if_ready(self) -> None:
        if not all_ready(self.ranks):
            return
        self.checks_changed([u for info in self.ranks for u in self.checks.finish(info.rank)])
        if self.run is not None:
            seconds = time.monotonic() - (self.boot_started or time.monotonic())
            self.run.event("ready", seconds=round(seconds, 2))
        self.changed.set()

    def end_boot(self, info: RankInfo) -> None:
        """The rank's boot is over without ready: what never showed has failed."""
        self.checks_changed(self.checks.finish(info.rank))
