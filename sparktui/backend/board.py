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

from sparktui.backend.events import ChecksChanged, Event, Notice, RankChanged, StallChanged
from sparktui.core.checks import BootChecks, CheckUpdate
from sparktui.core.cluster import Node
from sparktui.core.engines import PEER_LOST_LINES, engine
from sparktui.core.plan import Plan
from sparktui.core.ranks import (
    BOOTING,
    CAUSE_EVENT,
    RUNNING,
    Cause,
    RankInfo,
    RankState,
    all_ready,
    all_settled,
    ready_now,
)
from sparktui.core.runstore import Run, ts_epoch
from sparktui.core.stall import Quiet, Stall, find_stall
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


SIMULTANEOUS_S = 1.0
"""Ends this close together are one fall: a rank that printed nothing fatal (killed, crashed)
went before one that printed a fatal line."""
PEER_LOST_S = 2.0
"""A rank whose log says a peer went away (``PEER_LOST_LINES``) fell after a peer that ended
this close to it without saying so: the times are the nodes' (a log line is stamped when its
reader gets to it, an exit when it is reaped), and on a loaded machine they lag by that much."""

SILENT, OWN, ECHO = 0, 1, 2
"""What a failed rank's own log says of its end: nothing fatal, a fatal line of its own, or that
a peer went away."""


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
        # a failed rank's own evidence: when it failed on its node (fatal line, exit) and why,
        # whatever the fall of its group made its state say; the first failure is decided
        # from these, so the order they are noticed in does not change who is named
        self.own: dict[int, tuple[float, Cause]] = {}
        self.redactor = plan.redactor()  # a notice or detail may quote a secret (an engine error)
        self.stall: Stall | None = None  # the booting rank that went quiet, while it is quiet

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
        if state != "failed":
            self.own.pop(info.rank, None)
            self.fell_with.pop(info.rank, None)
        elif cause is not None and cause.code not in ("group_fell", "peer_restarted"):
            self.own.setdefault(info.rank, (info.failed_at or time.time(), cause))
        if self.ending is not None and state != "ready":  # not every rank ready any more
            self.ending.cancel()
            self.ending = None
        if state not in RUNNING:
            info.health = None  # the engine is gone (or not there yet): no code to show
        if self.run is not None:
            self.run.event("rank", rank=info.rank, state=state, detail=info.detail,
                           cause=cause.code if cause is not None else None,
                           why=cause.to_json() if cause is not None else None,
                           exit_code=info.exit_code, container_id=info.container_id)
        self.announce(info)
        if state in ("failed", "restarting") and self.formed:
            self.group_lost(info, "group_fell" if state == "failed" else "peer_restarted")
        elif state == "failed" and info.rank in self.own:
            self.name_first()
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
        """A rank already failed (its group's fall, or a fatal line of its own) reports its own
        end (its container exited): evidence for who failed first."""
        if info.rank not in self.own:
            self.own[info.rank] = (when if when is not None else time.time(), why)
        self.announce(info)  # its exit code is news
        self.name_first()

    def evidence(self, rank: int) -> int:
        """``SILENT``, ``OWN`` or ``ECHO``: what the rank's log says of its end."""
        if self.checks.shown(rank, PEER_LOST_LINES):
            return ECHO
        return SILENT if self.checks.fatal(rank) is None else OWN

    def went_before(self, a: RankInfo, a_at: float, b: RankInfo, b_at: float) -> bool:
        """Whether ``a`` (failed at ``a_at``) fell before ``b``: close together, the rank whose
        log says less of its end (a killed rank says nothing; its peers report the lost
        collective); else the earlier."""
        ea, eb = self.evidence(a.rank), self.evidence(b.rank)
        window = PEER_LOST_S if ECHO in (ea, eb) else SIMULTANEOUS_S
        if ea != eb and abs(a_at - b_at) < window:
            return ea < eb
        return a_at < b_at

    def first_failed(self) -> RankInfo | None:
        """The rank that failed first, from every failed rank's own evidence (``own``): the same
        answer whatever order the ends and lines were noticed in."""
        own = sorted(((self.ranks[r], at) for r, (at, _) in self.own.items()
                      if self.ranks[r].state == "failed"), key=lambda p: (p[1], p[0].rank))
        if not own:
            return None
        first, first_at = own[0]
        for info, at in own[1:]:
            if self.went_before(info, at, first, first_at):
                first, first_at = info, at
        return first

    def name_first(self) -> None:
        """The first failure sorts first (``first_failures`` orders by ``failed_at``), and in a
        formed group's fall every other rank is said to have fallen with it."""
        if any(self.ranks[r].state != "failed" for r in self.fell_with.values()):
            return  # the group fell because a rank was restarted alone: no rank failed first
        first = self.first_failed()
        failed = [r for r in self.ranks if r.state == "failed" and r.failed_at is not None]
        if first is None or not failed:
            return
        named = min(failed, key=lambda r: (r.failed_at or 0.0, r.rank))
        if named is first:
            return
        assert named.failed_at is not None
        first.failed_at = min(self.own[first.rank][0], named.failed_at - 0.001)
        cause = self.fell_with.pop(first.rank, None)
        if cause is not None:  # the fall was pinned on another rank: on this one now
            self.fell_with[cause] = first.rank
            first.cause = self.own[first.rank][1].masked(self.redactor.text)
            for rank in self.fell_with:
                self.fell_with[rank] = first.rank
                before = self.own[rank][1] if rank == cause and rank in self.own else None
                self.ranks[rank].cause = Cause("group_fell", rank=first.rank, before=before)
            if self.run is not None:  # an attach says these again (``restore_said``)
                for said in (first, *(self.ranks[r] for r in self.fell_with)):
                    if said.cause is not None:
                        self.run.event(CAUSE_EVENT, rank=said.rank, container_id=said.container_id,
                                       detail=said.detail, why=said.cause.to_json())
        for changed in self.ranks:
            self.announce(changed)

    def apply_failed_checks(self, info: RankInfo) -> None:
        """A failed rank's lines came after its failure: what they say of its end may change
        who is named first (a peer's loss reported, a fatal line of its own)."""
        if info.state == "failed" and len(self.own) > 1:
            self.name_first()

    # -- a stalled boot --------------------------------------------------------------------
    def stalled(self, now: float | None = None) -> Stall | None:
        """The stall among the booting ranks now (``core.stall``), without saying it."""
        now = time.time() if now is None else now
        booting = [i for i in self.ranks if i.state == "booting"]
        if not booting or self.boot_started is None:
            return None
        began = now - (time.monotonic() - self.boot_started)  # this boot's start, as epoch
        # a rank's last line is of this launch (a launch forgets it): none yet, the boot's start
        quiet = [Quiet(i.rank, i.last_line_at, i.last_line) if i.last_line_at is not None
                 else Quiet(i.rank, began, None) for i in booting]
        return find_stall(quiet, now, self.plan.boot.stall_s)

    def watch_stall(self, now: float | None = None) -> None:
        """Asked on every tick of the boot watch: a booting rank silent for ``[boot] stall``
        while the others printed, or every booting rank silent that long, is said once (a
        notice, an event, a run event ``stall``) until it prints again (``stall-cleared``)."""
        stall = self.stalled(now)
        old = self.stall
        if stall is not None and old is not None and (stall.rank, stall.every) == (old.rank, old.every):
            self.stall = stall  # the same stall, longer: said already
            return
        self.stall = stall
        if stall is None and old is None:
            return
        if stall is not None:
            if self.run is not None:
                self.run.event("stall", **stall.to_json())  # masked as every event is
            self.emit(StallChanged(stall))
            self.notice("warning", f"boot stalled: {stall.sentence}")  # masked as every notice
        else:
            assert old is not None
            if self.run is not None:
                self.run.event("stall-cleared", rank=old.rank)
            self.emit(StallChanged(None))

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
        if info.state == "failed":
            self.apply_failed_checks(info)
            return
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
