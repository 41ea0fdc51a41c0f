"""Is the engine alive in its container? Per running rank, at the health prober's interval, the
container's processes (the runtime's ``Processes``): the engine's pid, state and CPU seconds on
the rank; a rank whose engine was seen and is gone while its container runs (a shell wrapper
that waits) FAILS with ``engine_gone`` through ``Board.set_state`` (so the group falls and the
watchdog acts); one whose engine is stopped (``T``) or whose CPU time and log stood still for
``STUCK_SAMPLES`` samples has a warning, not a failure.

One ``docker top`` per rank per interval: dockerd runs ``ps`` on the node, a few ms each.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from sparktui.backend.board import Board
from sparktui.backend.runtimes.base import Processes
from sparktui.backend.together import together
from sparktui.core.engines import FATAL_LINES, engine
from sparktui.core.procs import EngineSample, EngineTrack, gone_text, marks_of, masked, says_fatal
from sparktui.core.ranks import RUNNING, Cause, RankInfo
from sparktui.core.timing import mark

FALL_GRACE_S = 0.5
"""Several engines gone by one look: how long their last lines are waited for before they are
ordered (a peer's lost-collective line says it went second)."""


class EngineWatch:
    def __init__(self, board: Board, processes: Processes, *, interval: float) -> None:
        self.board = board
        self.processes = processes
        self.interval = interval
        self.closed = False
        self.marks = marks_of(engine(board.plan.engine).process_marks)
        self._tracks: dict[int, tuple[str, EngineTrack]] = {}  # rank -> (container id, track)
        self._lines: dict[int, list[str]] = {}  # rank -> its last lines at the last sample
        self._gone: dict[int, str] = {}  # rank -> what still runs, in this look

    @staticmethod
    def watched(info: RankInfo) -> bool:
        return (info.state in RUNNING and info.container_id is not None and not info.removed
                and not info.ended)

    def _track(self, info: RankInfo) -> EngineTrack:
        """The rank's samples since its container started (a new container starts over)."""
        cid = info.container_id or ""
        held = self._tracks.get(info.rank)
        if held is None or held[0] != cid:
            held = (cid, EngineTrack())
            self._tracks[info.rank] = held
        return held[1]

    def _log_moved(self, info: RankInfo) -> bool:
        lines = list(info.last_lines)
        moved = self._lines.get(info.rank) != lines
        self._lines[info.rank] = lines
        return moved

    async def look(self, info: RankInfo, judge: bool) -> tuple[RankInfo, bool, bool] | None:
        """One look into the rank's container: shown on the rank; returns (the rank, whether
        its engine is gone, whether its log moved since the last look), None when nothing was
        learnt."""
        if not self.watched(info) or info.container_id is None:
            return None
        cid = info.container_id
        try:
            procs = await self.processes.processes(info.node.name, cid)
        except Exception as exc:  # stopped meanwhile, node lost: the follower says so
            mark(f"engine watch: rank {info.rank}: {exc}")
            return None
        if info.container_id != cid or not self.watched(info):
            return None  # restarted or ended while asked
        sample = EngineSample.of(masked(procs, self.board.redactor.text), self.marks)
        moved = self._log_moved(info)
        view, gone = self._track(info).add(sample, moved, self.interval)
        if judge and sample.main is not None and (
                info.engine is None or info.engine.pid != sample.main.pid):
            # a new engine: its pid in the container, for a dump (not for a ``status``, which
            # shows none: a login shell on the node, 60-100 ms of it)
            with contextlib.suppress(Exception):
                await self.processes.container_pid(info.node.name, cid, sample.main.pid)
        if gone:
            self._gone[info.rank] = gone_text(sample)
        elif view != info.engine:
            if judge and self.board.run is not None and view.warning != (
                    info.engine.warning if info.engine is not None else None):
                self.board.run.event("engine", rank=info.rank, **view.to_json())
            info.engine = view
            self.board.announce(info)
        return info, gone, moved

    async def sample_all(self, judge: bool = True) -> None:
        """Every running rank at once. Ranks whose engines are gone by the same look fail in
        the order they most likely went: a killed or crashed engine prints nothing, its peers
        print their lost collective as they fall (as ``Board.failed_on_its_own`` reads exits),
        so the silent ones first; the first failure then takes the formed group with it."""
        self._gone = {}
        looks = await together(*(self.look(i, judge) for i in self.board.ranks))
        gone = [lk for lk in looks if lk is not None and lk[1]]
        if not judge or not gone:
            return
        if len(gone) > 1:
            await asyncio.sleep(FALL_GRACE_S)  # their last lines, still on their way
        gone.sort(key=lambda lk: (says_fatal(lk[0].last_lines, FATAL_LINES), lk[2], lk[0].rank))
        for info, _gone, _moved in gone:
            if self.watched(info):  # not already failed with the group
                self.board.set_state(info, "failed",
                                     Cause("engine_gone", text=self._gone[info.rank]), time.time())

    async def loop(self) -> None:
        while not self.closed:
            started = time.monotonic()
            await self.sample_all()
            await asyncio.sleep(max(0.05, self.interval - (time.monotonic() - started)))
