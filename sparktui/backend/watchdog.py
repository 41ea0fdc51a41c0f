"""The restart watchdog: while a console or ``sparktui watch`` follows a run, a group that had
been ready and then loses a rank, is marked wedged by the liveness canary (``[liveness]``,
``backend/canary``), or whose smoke request fails twice in a row, is restarted
whole (same run), at most ``max`` times per ``window`` (the recipe's ``[restart]``).

The budget is counted from the run's events.jsonl, so a watchdog started again later (another
``watch``, the console reopened) spends the same budget. Every restart and the budget being
spent are recorded there with their reason and announced as notices.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from sparktui.backend.events import Event, RankChanged
from sparktui.core.errors import sentence
from sparktui.core.recipe import RestartPolicy
from sparktui.core.restarts import budget_text, could_not_start, restarts_in_window

if TYPE_CHECKING:
    from sparktui.backend.orchestrator import Orchestrator
    from sparktui.core.ranks import RankInfo

SMOKE_FAILURES = 2  # in a row, before the group counts as dead
GRACE_S = 2.0  # a TP group falls within moments: then the first to fail is known
SETTLE_S = 15.0  # ... once each failed rank's own end is seen: on a loaded machine that lags
RETRY_S = 5.0  # after a restart that failed (a node's engine or link was down): once more


class Watchdog:
    """Armed once every rank is ready; a failure while armed restarts the group (once)."""

    def __init__(self, orch: Orchestrator, policy: RestartPolicy) -> None:
        self.orch = orch
        self.policy = policy
        self.armed = False
        self.spent = False
        self._ready: set[int] = set()
        self._task: asyncio.Task[None] | None = None
        self._smoke_task: asyncio.Task[None] | None = None
        self._closed = False
        self._restarted: str | None = None
        """The reason of this watchdog's last group restart, until the group is ready again."""

    def start(self) -> None:
        """Watch from now on (the Orchestrator must be following its run)."""
        self.orch.subscribe(self.on_event)
        for info in self.orch.ranks:
            if info.state == "ready":
                self._ready.add(info.rank)
        formed, due, why = self.found()
        self.armed = len(self._ready) == len(self.orch.ranks) or formed
        if due:  # a watchdog killed mid-restart, or none watching at the fall
            self.armed = False
            self._trigger(why)
        if self.policy.smoke_every_s:
            self._smoke_task = asyncio.create_task(self._smoke_loop(self.policy.smoke_every_s),
                                                   name="watchdog-smoke")

    def found(self) -> tuple[bool, bool, str | None]:
        """What the run's events and the ranks say on starting: whether the group formed (was
        ready) since its last group restart, so that a rank lost from now on is the
        watchdog's to restart whatever the ranks' states are now (a rank restarted alone from
        the command line is booting while its TP group falls); whether the group must be
        restarted at once, and why (None: a rank failed, named once the group has fallen):
        it formed and has lost a rank since, with no watchdog watching, or a restart was cut
        short (a rank left with no container: the watchdog doing it was killed)."""
        run = self.orch.run
        if run is None:
            return False, False, None
        events = run.events()
        ready = max((i for i, ev in enumerate(events) if ev.get("kind") == "ready"), default=-1)
        restart = max((i for i, ev in enumerate(events)
                       if ev.get("kind") == "restart" and ev.get("group")), default=-1)
        formed = ready > restart
        bare = [info for info in self.orch.ranks if not info.has_container]
        if formed and self.orch.failures():
            return formed, True, None
        if ready >= 0 and bare:
            return formed, True, (f"rank {bare[0].rank} has no container since the group was "
                                  "ready (a restart cut short)")
        unstarted = sorted({*could_not_start(events[restart + 1:]), *(
            r.rank for r in self.unstarted())}) if ready >= 0 and restart >= 0 else []
        if unstarted:  # the watchdog that would have tried again was killed meanwhile
            return formed, True, (f"rank {unstarted[0]} could not start in the last group "
                                  "restart (a restart cut short)")
        return formed, False, None

    def on_event(self, event: Event) -> None:
        if self._closed or not isinstance(event, RankChanged):
            return
        snap = event.rank
        if snap.state == "ready":
            self._ready.add(snap.rank)
            if len(self._ready) == len(self.orch.ranks) and not self.armed:
                self.armed = True
                self.spent = False
                self._restarted = None
        else:
            self._ready.discard(snap.rank)
        if (snap.state == "failed" and not self.armed and self._restarted is not None
                and snap.cause is not None and snap.cause.code == "could_not_start"
                and (self._task is None or self._task.done())):
            # after the restart's return (Slurm: a step whose container never started): the
            # restart failed as much as one that raised
            reason = self._restarted
            self._task = asyncio.create_task(
                self._again(f"rank {snap.rank} {snap.detail}", reason), name="watchdog-restart")
        if snap.state == "failed" and self.armed:
            self.armed = False
            self._trigger(None)
        elif snap.state == "wedged" and self.armed:  # the canary's verdict holds for the group
            self.armed = False
            self._trigger(f"the group is wedged: {snap.detail}")

    def _trigger(self, reason: str | None) -> None:
        """``reason`` None: a rank failed; which one failed first is known after the group has
        had ``GRACE_S`` to fall (the ranks' ends are noticed in any order)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._restart(reason), name="watchdog-restart")

    async def _restart(self, reason: str | None) -> None:
        if reason is None:
            await asyncio.sleep(GRACE_S)
            # the rank that died first (killed, crashed: it says nothing) is named once its own
            # end is seen; its peers' fatal lines about the lost group may be seen before it
            settle = time.monotonic() + SETTLE_S
            while time.monotonic() < settle and any(
                    r.state == "failed" and not r.ended for r in self.orch.ranks):
                await asyncio.sleep(0.2)
            failed = self.orch.failures()
            if not failed:
                return  # nothing is failed any more (restarted by hand meanwhile)
            reason = f"rank {failed[0].rank} failed after ready: {failed[0].detail}"
        run = self.orch.run
        if run is None:
            return
        used = restarts_in_window(run, self.policy.window_s)
        if len(used) >= self.policy.max:
            self.spent = True
            text = f"restart budget spent ({budget_text(self.policy)}): the group stays failed; {reason}"
            run.event("watchdog", action="budget-spent", reason=reason, at=time.time())
            self.orch.board.notice("error", text)
            return
        n = len(used) + 1
        self._restarted = reason
        run.event("watchdog", action="restart", reason=reason, at=time.time())
        self.orch.board.notice("warning", f"watchdog: restarting the whole group "
                                          f"({n} of {budget_text(self.policy)}): {reason}")
        try:
            await self.orch.restart_group(by="by the watchdog")
            unstarted = self.unstarted()
            broke = (f"rank {unstarted[0].rank} {unstarted[0].detail}" if unstarted else None)
        except Exception as exc:
            broke = sentence(exc)
        if broke is not None:  # a rank that could not start leaves its group booting forever
            await self._again(broke, reason)

    async def _again(self, broke: str, reason: str) -> None:
        self.orch.board.notice("error", f"watchdog: the group restart failed: {broke}; "
                                        f"trying again in {RETRY_S:g} s")
        await asyncio.sleep(RETRY_S)  # a node's engine or link coming back: again, in budget
        if not self._closed and not self.armed:
            await self._restart(reason)

    def unstarted(self) -> list[RankInfo]:
        """Ranks a group restart could not start (their node's engine away meanwhile)."""
        return [r for r in self.orch.ranks if r.state == "failed" and r.cause is not None
                and r.cause.code == "could_not_start"]

    async def _smoke_loop(self, every: float) -> None:
        failures = 0
        while not self._closed:
            await asyncio.sleep(every)
            if not self.armed:
                failures = 0
                continue
            try:
                await self.orch.smoke()
                failures = 0
            except Exception as exc:
                failures += 1
                self.orch.board.notice("warning", f"watchdog: smoke request failed "
                                                  f"({failures} in a row): {sentence(exc)}")
                if failures >= SMOKE_FAILURES:
                    failures = 0
                    self.armed = False
                    self._trigger(f"the smoke request failed {SMOKE_FAILURES} times in a row")

    async def close(self) -> None:
        self._closed = True
        for task in (self._task, self._smoke_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
