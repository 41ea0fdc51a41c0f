"""What the Orchestrator's jobs share: the ranks, the boot checks, the run, and the one way a
rank's state changes (checked by ``core.ranks``, recorded in the run, announced to listeners).

The log follower, the health prober and the boot watch each hold the Board; none of them holds
another, so each can be read (and tested) on its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from sparktui.backend.events import ChecksChanged, Event, Notice, RankChanged
from sparktui.core.checks import BootChecks, CheckUpdate
from sparktui.core.cluster import Node
from sparktui.core.engines import engine
from sparktui.core.plan import Plan
from sparktui.core.ranks import (
    BOOTING,
    RUNNING,
    Cause,
    RankInfo,
    RankState,
    all_ready,
    all_settled,
    ready_now,
)
from sparktui.core.runstore import Run, ts_epoch
from sparktui.core.timing import mark

SETTLE_S = 0.5
"""When a rank becomes ready, the other booting ranks are asked again this much later: one made
ready by another's facts (a worker when rank 0 is) may still have lines on their way from its own
node's log stream (a fatal line among them). And once every rank is ready, a boot whose checks
still wait for a line waits this long for it before it ends (what never showed fails); a boot
whose checks have all passed ends at once."""

BOOT_ENDED = "boot-ended"
"""The run's event saying which ranks' boots ended (their checks were finished)."""


def ended_boots(events: Iterable[dict[str, Any]], world: int) -> set[int]:
    """The ranks whose boot the run's events say ended since their last restart (every rank
    ready, or the rank failed or timed out): a replay finishes their checks as the live run
    did, so a reattach shows the verdicts the console showed."""
    ended: set[int] = set()
    for ev in events:
        kind = ev.get("kind")
        if kind == "restart":
            ended.discard(ev.get("rank", -1))
        elif kind == "ready":  # every rank was ready: every rank's checks were finished
            ended = set(range(world))
        elif kind == BOOT_ENDED:
            ended.update(r for r in ev.get("ranks", []) if isinstance(r, int) and 0 <= r < world)
    return ended


SIMULTANEOUS_S = 1.0  # ends this close together are one fall; who printed nothing went first


class Board:
    def __init__(self, plan: Plan, nodes: Sequence[Node], emit: Callable[[Event], None]) -> None:
        self.plan = plan
        self.emit = emit
        self.ranks = [RankInfo(r.rank, nodes[r.rank]) for r in plan.ranks]
        self.checks = BootChecks.for_plan(plan)
        self.run: Run | None = None
        self.boot_started: float | None = None  # time.monotonic() of the last launch or restart
        self.changed = asyncio.Event()  # set on a failure or when every rank settled: wakes wait()
        # A ready line appeared: the prober probes the booting ranks now (a worker's readiness
        # may hang on rank 0's line and its own probe) instead of at its next tick.
        self.probe_soon = asyncio.Event()
        self.ending: asyncio.TimerHandle | None = None  # every rank ready; a check's line awaited
        self.formed = False  # every rank was ready in this boot: losing one now loses the group
        self.fell_with: dict[int, int] = {}  # rank -> the rank named as the group's first failure
        self.redactor = plan.redactor()  # a notice or detail may quote a secret (an engine error)

    def new_checks(self) -> None:
        self.checks = BootChecks.for_plan(self.plan)

    # -- announcing ------------------------------------------------------------------------
    def notice(self, level: Literal["info", "warning", "error"], text: str) -> None:
        text = self.redactor.text(text)
        if self.run is not None:
            self.run.event("notice", level=level, text=text)
        self.emit(Notice(level, text))

    def announce(self, info: RankInfo) -> None:
        self.emit(RankChanged(info.snapshot()))

    def checks_changed(self, updates: list[CheckUpdate]) -> None:
        for u in updates:  # a rank's flag verdicts, for the record (attach recomputes them)
            report = self.checks.report(u.rank) if u.check.kind == "args" else None
            if report is not None and self.run is not None:
                self.run.event("args", rank=u.rank, state=u.state, summary=report.summary(),
                               **report.to_json())
        if updates:
            self.emit(ChecksChanged(updates, self.checks.snapshot()))

    # -- state -----------------------------------------------------------------------------
    def set_state(self, info: RankInfo, state: RankState, cause: Cause | None = None,
                  when: float | None = None) -> None:
        """``cause``: why (a code; its sentence is the rank's detail). ``when``: the epoch
        second the failure happened on the node (log line or exit)."""
        if cause is not None:
            cause = cause.masked(self.redactor.text)
        if not info.move(state, cause, when):
            return
        mark(f"rank {info.rank}: {state}")
        if self.ending is not None and state != "ready":  # not every rank ready any more
            self.ending.cancel()
            self.ending = None
        if state not in RUNNING:
            info.health = None  # the engine is gone (or not there yet): no code to show
        if self.run is not None:
            self.run.event("rank", rank=info.rank, state=state, detail=info.detail,
                           cause=cause.code if cause is not None else None,
                           exit_code=info.exit_code, container_id=info.container_id)
        self.announce(info)
        if state in ("failed", "restarting") and self.formed:
            self.group_lost(info, "group_fell" if state == "failed" else "peer_restarted")
        if state == "failed" or all_settled(self.ranks):
            self.changed.set()

    def group_lost(self, cause: RankInfo, why: Literal["group_fell", "peer_restarted"]) -> None:
        """A TP group that had formed does not survive losing a rank: the others are failed
        because of it (real SGLang and vLLM groups fall over; the first to go is named)."""
        self.formed = False
        self.fell_with = {}
        for info in self.ranks:
            if info is not cause and info.state in RUNNING:
                self.fell_with[info.rank] = cause.rank
                after = cause.failed_at + 0.001 if cause.failed_at is not None else None
                self.set_state(info, "failed", Cause(why, rank=cause.rank), after)

    def failed_on_its_own(self, info: RankInfo, why: Cause, when: float | None) -> None:
        """A rank the group's fall had already failed reports its own end (its container
        exited). Ranks fall within moments of each other and are noticed in any order: this
        one failed first when it ended before the rank named first, or within a moment of it
        without a fatal line of its own while the rank named first printed one (a crashed or
        killed rank says nothing; its peers then report the lost collective)."""
        cause = self.fell_with.get(info.rank)
        first = self.ranks[cause] if cause is not None else None
        if first is None or when is None or first.failed_at is None or not (
                when < first.failed_at or (
                    when < first.failed_at + SIMULTANEOUS_S
                    and self.checks.fatal(info.rank) is None
                    and self.checks.fatal(first.rank) is not None)):
            self.announce(info)  # its exit code is news; why it failed is not
            return
        del self.fell_with[info.rank]
        info.cause = why.masked(self.redactor.text)
        info.failed_at = min(when, first.failed_at - 0.001)
        self.fell_with[first.rank] = info.rank
        first.cause = Cause("group_fell", rank=info.rank, before=first.cause)
        for rank in self.fell_with:
            self.fell_with[rank] = info.rank
            if rank != first.rank:
                self.ranks[rank].cause = Cause("group_fell", rank=info.rank)
        for changed in self.ranks:
            self.announce(changed)

    def set_health(self, info: RankInfo, code: int | None) -> None:
        """A probe's answer; none counts for a rank that failed, stopped or lost its container
        meanwhile (the probe was under way when it did)."""
        if info.state not in RUNNING or info.removed:
            code = None
        elif self.plan.ranks[info.rank].serves_http:
            info.probed = True  # asked: from now on None means nothing answers, not "not asked"
        if code != info.health:
            info.health = code
            self.announce(info)
        self.maybe_ready(info)

    def apply_checks(self, info: RankInfo, stamps: dict[int, str] | None = None) -> None:
        """After the rank's checks changed: a fatal line fails a booting rank; the ready line
        may make it ready."""
        fatal = self.checks.fatal(info.rank)
        if fatal is not None and info.state in BOOTING:
            when = ts_epoch((stamps or {}).get(fatal.line_no))
            self.set_state(info, "failed", Cause("fatal_line", line_no=fatal.line_no,
                                                 text=fatal.text), when)
            return
        self.maybe_ready(info)
        if self.ending is not None and not self._checks_waiting():
            self._end_ready_boot()  # the line the boot waited for came

    def ready_line(self) -> None:
        """A rank's ready line appeared: booting ranks may now be ready by a probe."""
        self.probe_soon.set()

    def maybe_ready(self, info: RankInfo) -> None:
        """Ready ``info`` if its engine's rule says so. A rank's readiness may hang on another's
        (vLLM's headless workers are ready when rank 0 is), so once one rank becomes ready every
        other booting rank is asked again, ``SETTLE_S`` later (at once without an event loop)."""
        if not self._ready_now(info):
            return
        self.set_state(info, "ready")
        self._finish_boot_if_ready()
        if all_ready(self.ranks):
            return
        try:
            asyncio.get_running_loop().call_later(SETTLE_S, self.ask_again)
        except RuntimeError:  # no event loop (a test driving the Board by hand)
            self.ask_again()

    def ask_again(self) -> None:
        """Every booting rank's readiness, asked again until none changes: a loop, never a
        recursion."""
        changed, readied = True, False
        while changed:
            changed = False
            for other in self.ranks:
                if other.state == "booting" and self._ready_now(other):
                    self.set_state(other, "ready")
                    changed = readied = True
        if readied:
            self._finish_boot_if_ready()

    def _ready_now(self, info: RankInfo) -> bool:
        return ready_now(info, engine(self.plan.engine),
                         line_seen=self.checks.ready_seen(info.rank),
                         head_line_seen=self.checks.ready_seen(0),
                         head_ready=self.ranks[0].state == "ready")

    def _finish_boot_if_ready(self) -> None:
        """Every rank ready: the boot ends, at once when no check waits for a line; else when
        its line comes (``apply_checks``) or ``SETTLE_S`` later. A rank made ready by a probe
        may have lines still on their way through its node's log stream; ending the boot
        before they came failed their checks (the console and ``up --wait`` wait for this)."""
        if not all_ready(self.ranks) or self.ending is not None:
            return
        self.formed = True
        mark("board: every rank ready")
        if self._checks_waiting():
            try:
                self.ending = asyncio.get_running_loop().call_later(SETTLE_S, self._end_ready_boot)
                return
            except RuntimeError:  # no event loop (a test driving the Board by hand)
                pass
        self._end_ready_boot()

    @property
    def boot_ending(self) -> bool:
        """Every rank is ready and the boot waits for a check's line (see ``SETTLE_S``)."""
        return self.ending is not None

    def _checks_waiting(self) -> bool:
        """A check of a rank whose boot has not ended yet still waits for its line."""
        checks = self.checks
        return any(checks.overall(c) == "pending" for c in checks.checks
                   if c.kind != "must_not_show"
                   and any(c.applies_to(i.rank) and i.rank not in checks.finished for i in self.ranks))

    def _end_ready_boot(self) -> None:
        if self.ending is not None:
            self.ending.cancel()
            self.ending = None
        if not all_ready(self.ranks):  # a rank fell meanwhile: its failure ended the boot
            return
        ended = [info.rank for info in self.ranks if info.rank not in self.checks.finished]
        if ended:  # none: a reattach found this boot's end recorded already
            self.end_checks(ended)
            if self.run is not None:
                seconds = time.monotonic() - (self.boot_started or time.monotonic())
                self.run.event("ready", seconds=round(seconds, 2))
        mark("board: boot ended")
        self.changed.set()

    def end_boot(self, info: RankInfo) -> None:
        """The rank's boot is over without ready: what never showed has failed."""
        self.end_checks([info.rank])

    def end_checks(self, ranks: list[int]) -> None:
        """These ranks' boots are over: what never showed has failed. Recorded in the run, so
        a later attach reaches the same verdicts (``ended_boots``)."""
        self.checks_changed([u for rank in ranks for u in self.checks.finish(rank)])
        if self.run is not None and ranks:
            self.run.event(BOOT_ENDED, ranks=ranks)
