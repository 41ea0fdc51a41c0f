"""The liveness canary (the recipe's ``[liveness]``): once every rank is ready, every ``every``
a real completion of ``max_tokens`` through the head, bounded by ``timeout``.

Why: a head's ``/health`` answers 200 while a TP peer is wedged (SGLang's does not see it); only
a forward pass, which goes through every peer, finds it. Two failures in a row mark every rank of
the formed group ``wedged`` (cause ``canary``); a later answer marks them ready again. The
restart watchdog sees the state change (a ``RankChanged``) and restarts the group.

The request is the engine adapter's (``Engine.completion``: SGLang's ``/generate``, vLLM's
``/v1/completions``), sent from the head's node through its SSH connection as the health probes
are (the runtime's ``NodeProbe`` opener). Every canary is a ``canary`` run event (ok with its
latency, or failed with why); marking and unmarking are ``wedged`` / ``unwedged`` events.
"""

from __future__ import annotations

import asyncio
import json
import time

from sparktui.backend.board import Board
from sparktui.backend.events import CanaryChanged
from sparktui.backend.health import PROBE_HOST
from sparktui.backend.http import Opener, request
from sparktui.core.canary import FAILURES_TO_WEDGE, CanaryRecord
from sparktui.core.engines import engine
from sparktui.core.plan import LivenessPlan
from sparktui.core.ranks import Cause
from sparktui.core.rankstate import RankState

UP: frozenset[RankState] = frozenset({"ready", "wedged"})
"""A rank whose group formed and still runs: the canary asks such a group only."""


class Canary:
    def __init__(self, board: Board, liveness: LivenessPlan, opener: Opener | None,
                 shown_host: str) -> None:
        """``opener``: connections from the head's node (None: the runtime opens none, and no
        canary is sent); ``shown_host``: the head's name in sentences."""
        self.board = board
        self.liveness = liveness
        self.opener = opener
        self.shown_host = shown_host
        self.last: CanaryRecord | None = None
        self.failures = 0
        self.closed = False

    def group_up(self) -> bool:
        """Every rank ready (or wedged): the group formed and runs."""
        return all(r.state in UP for r in self.board.ranks)

    async def once(self) -> CanaryRecord:
        """One canary completion; its record (a failure counted in ``failures``)."""
        plan = self.board.plan
        lv = self.liveness
        rules = engine(plan.engine)
        ask = rules.completion(plan.served_model_name, lv.max_tokens)
        port = plan.ranks[0].port
        at, start = time.time(), time.monotonic()
        why: str | None = None
        if self.opener is None:
            why = "the runtime opens no connection on the head's node"
        else:
            try:
                res = await request(PROBE_HOST, port, ask.path, method="POST",
                                    body=json.dumps(ask.body).encode(), timeout=lv.timeout_s,
                                    opener=self.opener)
                if res.status != 200:
                    why = f"HTTP {res.status}: {res.body.decode(errors='replace')[:200]}"
                elif rules.completion_text(_json(res.body)) is None:
                    why = f"the answer is not a completion: {res.body.decode(errors='replace')[:200]}"
            except asyncio.TimeoutError:
                why = f"timed out after {lv.timeout_s:g} s"
            except ConnectionRefusedError:
                why = "connection refused: is the head running?"
            except OSError as exc:
                why = str(exc.strerror or exc)
        latency = (time.monotonic() - start) * 1000
        if why is None:
            self.failures = 0
            record = CanaryRecord(True, at, latency_ms=round(latency, 1))
        else:
            self.failures += 1
            why = self.board.redactor.text(f"POST {ask.path} on {self.shown_host}:{port}: {why}")
            record = CanaryRecord(False, at, why=why, failures=self.failures)
        self.last = record
        return record

    def _record(self, record: CanaryRecord, judge: bool) -> None:
        """Record and announce ``record``; ``judge``: the group is still up, so two failures
        mark it wedged and an answer unmarks it."""
        board = self.board
        if board.run is not None:
            board.run.event("canary", **record.to_json())
        board.emit(CanaryChanged(record))
        if not judge:
            return
        wedged = [r for r in board.ranks if r.state == "wedged"]
        if not record.ok and record.failures >= FAILURES_TO_WEDGE and not wedged:
            cause = Cause("canary", text=record.why)
            if board.run is not None:
                board.run.event("wedged", reason=cause.sentence, at=time.time())
            board.notice("error", f"the group is wedged: {cause.sentence}")
            for info in board.ranks:
                if info.state == "ready":
                    board.set_state(info, "wedged", cause)
        elif record.ok and wedged:
            if board.run is not None:
                board.run.event("unwedged", at=time.time(), latency_ms=record.latency_ms)
            board.notice("info", f"the group serves again: the canary answered in "
                                 f"{record.latency_ms or 0:.0f} ms")
            for info in wedged:
                board.set_state(info, "ready")

    async def loop(self) -> None:
        """While following: a canary every ``every`` (from one's start to the next's) while the
        group is up; a group that is not up starts its count of failures over."""
        every = self.liveness.every_s
        while not self.closed:
            started = time.monotonic()
            if self.group_up():
                record = await self.once()
                if self.closed:
                    return
                up = self.group_up()  # restarted or fell meanwhile: not the canary's to judge
                if not up:
                    self.failures = 0
                self._record(record, up)
            else:
                self.failures = 0
            await asyncio.sleep(max(0.05, started + every - time.monotonic()))


def _json(body: bytes) -> object:
    try:
        return json.loads(body or b"null")
    except ValueError:
        return None
