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
import time

from sparktui.backend.board import Board
from sparktui.backend.runtimes.base import Processes
from sparktui.core.engines import engine
from sparktui.core.procs import EngineSample, EngineTrack, gone_text, marks_of, masked
from sparktui.core.ranks import RUNNING, Cause, RankInfo
from sparktui.core.timing import mark


class EngineWatch:
    def __init__(self, board: Board, processes: Processes, *, interval: float) -> None:
        self.board = board
        self.processes = processes
        self.interval = interval
        self.closed = False
        self.marks = marks_of(engine(board.plan.engine).process_marks)
        self._tracks: dict[int, tuple[str, EngineTrack]] = {}  # rank -> (container id, track)
        self._lines: dict[int, list[str]] = {}  # rank -> its last lines at the last sample

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

    async def sample(self, info: RankInfo, *, judge: bool = True) -> None:
        """One look into the rank's container. ``judge``: a live watch (the engine once seen and
        now gone fails the rank); a one-off look (``status``) only shows what it found."""
        if not self.watched(info) or info.container_id is None:
            return
        cid = info.container_id
        try:
            procs = await self.processes.processes(info.node.name, cid)
        except Exception as exc:  # stopped meanwhile, node lost: the follower says so
            mark(f"engine watch: rank {info.rank}: {exc}")
            return
        if info.container_id != cid or not self.watched(info):
            return  # restarted or ended while asked
        sample = EngineSample.of(masked(procs, self.board.redactor.text), self.marks)
        track = self._track(info)
        view, gone = track.add(sample, self._log_moved(info), self.interval)
        if gone and judge:
            self.board.set_state(info, "failed", Cause("engine_gone", text=gone_text(sample)),
                                 time.time())
            return
        if view != info.engine:
            if view.warning != (info.engine.warning if info.engine else None) \
                    and self.board.run is not None and judge:
                self.board.run.event("engine", rank=info.rank, **view.to_json())
            info.engine = view
            self.board.announce(info)

    async def sample_all(self, judge: bool = True) -> None:
        await asyncio.gather(*(self.sample(i, judge=judge) for i in self.board.ranks))

    async def loop(self) -> None:
        while not self.closed:
            started = time.monotonic()
            await self.sample_all()
            await asyncio.sleep(max(0.05, self.interval - (time.monotonic() - started)))
