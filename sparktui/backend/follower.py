"""Every rank's log into the run's files: the follow loop, ingestion (files, checks, listeners)
and the catch-up of what containers wrote while no sparktui was watching.

A log stream ends when its container stops or the connection drops; the loop resumes from the
last cursor, so no line is lost or read twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from sparktui.backend.board import Board, ended_boots
from sparktui.backend.events import ChecksChanged, LogBatch, NodeChanged
from sparktui.backend.nodeshell import NodeError
from sparktui.backend.runtime import Containers, ContainerState, RuntimeLost
from sparktui.backend.together import together
from sparktui.core import timing
from sparktui.core.checks import BootChecks, Check
from sparktui.core.errors import sentence
from sparktui.core.linear import Regex
from sparktui.core.ranks import LAST_LINES, Cause, RankInfo
from sparktui.core.replay import REPLAY_FILE, ReplayCache, deciding_lines, last_lines
from sparktui.core.runstore import (
    END_FIRST,
    NEXT_CONTAINER,
    RankLog,
    Run,
    last_restarts,
    restart_line,
    ts_epoch,
)
from sparktui.core.stall import last_progress, progress

RECONNECT_FIRST_S = 0.5
RECONNECT_MAX_S = 5.0
POLL_S = 0.2  # a stream that ended while the container still runs is reopened after this
CHECK_ADDED = "check-added"  # the run's event for a check the operator added
TAIL_CHARS = 300  # of each of the last lines quoted in the detail of a rank that exited


def _since_restart(log: RankLog, restart: dict[str, object] | None, patterns: list[Regex],
                   recent: int = LAST_LINES, end: tuple[bytes, int] | None = None,
                   cache: ReplayCache | None = None, rank: int = 0, rewinds: int = 0,
                   ) -> tuple[list[tuple[int, str]], list[str]]:
    """What the rank's file holds since its last restart for its checks: the lines one of
    ``patterns`` matches (searched in blocks, ``core.replay``: the only lines that can change a
    check; with ``cache``, only those written since its last search), and the texts of its
    last ``recent`` lines. A run from before a restart event said its marker's line is read
    whole, as it always was."""
    if restart is not None and restart_line(restart) is None:
        batch = log.since_restart(restart)
        return ([(no, text) for no, text in batch if any(p.search(text) for p in patterns)],
                [text for _, text in batch[-recent:]] if recent else [])
    after = (restart_line(restart) or 0) if restart is not None else 0
    return (deciding_lines(log.path, after, patterns, cache, rank, rewinds),
            last_lines(log.path, after, recent, end) if recent else [])


def _mark_written(info: RankInfo, numbered: list[tuple[int, str, str]]) -> None:
    """The timing log's mark of a batch written to the rank's file (tests time the ingest by it)."""
    if timing.enabled() and numbered:
        timing.mark(f"rank {info.rank}: {len(numbered)} lines, the last written {numbered[-1][1]}")


class Unwritten(Exception):
    """A batch the run's file could not take (a full disk): the stream is read again from the
    last line written, whatever else an ``OSError`` of the stream itself would mean."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class LogFollower:
    def __init__(self, board: Board, runtimes: dict[str, Containers],
                 connect: Callable[[str], Awaitable[None]] | None = None) -> None:
        """``connect``: reaches a node again after its connection dropped (the runtime's)."""
        self.board = board
        self.runtimes = runtimes
        self.connect = connect
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.closed = False
        self._saving: asyncio.Task[None] | None = None  # the cursors being written, in a thread
        self.on_exit: Callable[[RankInfo, bool], None] | None = None
        """Told of a rank whose container ended on its own, and whether its runtime says the
        kernel's OOM killer ended it (``backend.kmsg`` reads the kernel's verdict)."""

    def following(self, rank: int) -> bool:
        task = self.tasks.get(rank)
        return task is not None and not task.done()

    def follow(self, info: RankInfo) -> None:
        """(Re)start following the rank's current container; none once closed (a restart that
        ends after the console or ``watch`` closed)."""
        if self.closed:
            return
        old = self.tasks.get(info.rank)
        if old is not None and not old.done():
            old.cancel()
        assert info.container_id is not None and self.board.run is not None
        self.tasks[info.rank] = asyncio.create_task(
            self._loop(info, info.container_id, self.board.run), name=f"follow-{info.rank}")

    async def drain(self, info: RankInfo, timeout: float = 5.0) -> None:
        """Let the rank's follower read what its stopped container still wrote, then end; a
        rank no follower follows (a restart from the command line) is caught up to its end
        instead: its container is removed next, and its last lines with it."""
        task = self.tasks.pop(info.rank, None)
        if task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, timeout)
        elif self.board.run is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._catch_up_rank(self.board.run, info, True), timeout)

    async def _loop(self, info: RankInfo, container_id: str, run: Run) -> None:
        rt = self.runtimes[info.node.name]
        cursor = await asyncio.to_thread(run.resume, info.rank, container_id)
        delay = RECONNECT_FIRST_S
        full = False  # the last batch could not be written: said once until one is
        while not self.closed:
            try:
                async for chunk in rt.logs(container_id, cursor, secrets=run.redactor.values):
                    try:
                        self.ingest(info, chunk.lines, run)
                    except OSError as exc:
                        raise Unwritten(exc) from exc
                    if full:
                        full = False
                        self.board.notice("info", f"rank {info.rank}: its log is written again, "
                                                  "from where it stopped")
                    cursor = chunk.cursor
                    run.set_cursor(info.rank, container_id, cursor, defer=True)
                    if run.cursors_due():
                        self._save_cursors(run)
                    delay = RECONNECT_FIRST_S
                await self._write_cursors(run)
                st = await rt.inspect(container_id)
                self.board.emit(NodeChanged(info.node.name, "connected"))
                if st.running:
                    await asyncio.sleep(POLL_S)
                    continue
                self._exited(info, st)
                return
            except asyncio.CancelledError:
                raise
            except (RuntimeLost, NodeError) as exc:
                self.board.emit(NodeChanged(info.node.name, "reconnecting", sentence(exc)))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_S)
                if self.connect is not None:
                    with contextlib.suppress(NodeError):
                        await self.connect(info.node.name)
                continue
            except Unwritten as exc:  # the run's file could not take the lines (a full disk)
                if not full:
                    self.board.notice("error", f"rank {info.rank}: its log cannot be written "
                                               f"({sentence(exc.cause)}); its lines wait in the "
                                               "container and are read again from the last one "
                                               "written")
                full = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_S)

    def _save_cursors(self, run: Run) -> None:
        """Write the cursors in a thread (their fsync took tens of milliseconds of the event
        loop on a busy disk: keys waited); one write at a time, the next chunk tries again."""
        if self._saving is None or self._saving.done():
            self._saving = asyncio.create_task(self._write_cursors(run), name="save-cursors")

    async def _write_cursors(self, run: Run) -> None:
        snapshot = run.take_cursors()  # taken here, on the loop: the followers change them
        if snapshot is None:
            return
        try:
            await asyncio.to_thread(run.write_cursors, snapshot)
        except OSError as exc:
            self.board.notice("warning", f"could not save the log cursors of run {run.id}: "
                                         f"{sentence(exc)}")

    def ingest(self, info: RankInfo, lines: list[tuple[str, str]], run: Run | None = None,
               checks: bool = True) -> None:
        """Lines of ``run`` (default: the current one): into its file, the checks and to the
        listeners. Lines of an earlier run (a follower still draining) go to that run's file
        only; ``checks`` False: to its file and the listeners only (checks never replayed)."""
        board = self.board
        run = run or board.run
        assert run is not None
        lines = run.redactor.lines(lines)  # engines print their own arguments, API key included
        numbered = run.log(info.rank).append(lines)
        board.emit(LogBatch(run.id, info.rank, numbered))
        if run is not board.run:
            return
        if not checks:
            _mark_written(info, numbered)
            return
        info.last_lines.extend(text for _, _, text in numbered[-LAST_LINES:])
        said = last_progress(numbered, board.checks.request_line)
        if said is not None:
            info.last_line_at, info.last_line = ts_epoch(said[0]) or time.time(), said[1]
        seen = timing.enabled() and board.checks.ready_seen(info.rank)
        updates = board.checks.feed(info.rank, [(no, text) for no, _, text in numbered])
        _mark_written(info, numbered)
        if timing.enabled() and numbered and not seen and board.checks.ready_seen(info.rank):
            timing.mark(f"rank {info.rank}: ready line seen")
        if updates:
            board.checks_changed(updates)
            board.apply_checks(info, {no: ts for no, ts, _ in numbered})
            if any(u.check.kind == "ready" and u.state == "passed" for u in updates):
                board.ready_line()

    async def replay_checks(self, run: Run, events: list[dict[str, Any]] | None = None) -> None:
        """Evaluate the checks over what the run's files already hold (since each rank's last
        restart), with the checks the operator added, then end the boots that had ended: those
        the run's events record (every rank ready, a rank failed or timed out) and those whose
        container no longer runs. The verdicts are the live run's: a line decides its check
        whether it came before or after the end. Files are read in a thread (hours of logs
        must not hold up the loop)."""
        board = self.board
        checks = board.checks
        gone = {i.rank for i in board.ranks if i.has_container and i.state in ("failed", "stopped")}
        if events is None:  # the caller's, when it has read them (attach)
            events = await asyncio.to_thread(run.events)
        added = {(c.pattern, str(c.ranks)) for c in checks.checks if c.added}
        for ev in events:
            if ev.get("kind") == CHECK_ADDED and (ev.get("pattern"), str(ev.get("ranks"))) not in added:
                with contextlib.suppress(ValueError, TypeError):
                    checks.add("must_show", ev["pattern"], ev["ranks"], added=True)
        restarts = last_restarts(events)
        for rank in restarts:
            checks.reset(rank)
        rewinds = Counter(ev.get("rank") for ev in events if ev.get("kind") == "log-rewound")
        cache = await asyncio.to_thread(ReplayCache.load, run.dir / REPLAY_FILE)

        def read(info: RankInfo) -> tuple[list[tuple[int, str]], list[str], tuple[str, str] | None]:
            log = run.log(info.rank)
            end = log.end(END_FIRST)  # read once for its last lines and its progress
            batch, recent = _since_restart(log, restarts.get(info.rank),
                                           checks.open_patterns(info.rank), end=end, cache=cache,
                                           rank=info.rank, rewinds=rewinds[info.rank])
            last = (log.last(lambda text: progress(text, checks.request_line), end=end)
                    if recent else None)
            return batch, recent, last

        # every rank's file at once, in threads (4 x 36 MB: 320 ms one after another, 230-250 ms
        # at once here; with the searches kept in the run's folder, only the lines written
        # since the last attach), then fed in rank order on the loop
        found = await together(*(asyncio.to_thread(read, info) for info in board.ranks))
        try:
            await asyncio.to_thread(cache.save)
        except OSError as exc:  # the next attach searches the files whole: said, not fatal
            board.notice("warning", f"could not keep the boot checks' search of run {run.id}: "
                                    f"{sentence(exc)}")
        for info, (batch, recent, last) in zip(board.ranks, found, strict=True):
            info.last_lines.extend(recent)
            if last is not None and info.last_line_at is None:
                info.last_line_at, info.last_line = ts_epoch(last[0]), last[1]
            checks.feed(info.rank, batch)
            board.apply_checks(info)
        for rank in sorted(ended_boots(events, len(board.ranks)) | gone):
            checks.finish(rank)
        board.emit(ChecksChanged([], checks.snapshot()))

    async def add_check(self, pattern: str, ranks: str | list[int]) -> tuple[Check, BootChecks]:
        """A must-show check: evaluated on what the run captured since each rank's last
        restart, then live as lines arrive. Raises ValueError with a sentence on a bad
        pattern."""
        board = self.board
        checks = board.checks
        check = checks.add("must_show", pattern, ranks, added=True)
        run = board.run
        if run is not None:
            run.event(CHECK_ADDED, pattern=pattern, ranks=ranks)  # a reattach adds it again
            restarts = last_restarts(await asyncio.to_thread(run.events))
            for info in board.ranks:
                lines, _ = await asyncio.to_thread(_since_restart, run.log(info.rank),
                                                   restarts.get(info.rank), [check.regex], 0)
                if board.checks is not checks:
                    break  # a new run started meanwhile; its checks start over
                checks.feed(info.rank, lines, only=check)
            if board.checks is checks:  # a boot that ended: judged as the others were at its end
                for rank in sorted(checks.finished):
                    checks.finish(rank, only=check)
        board.emit(ChecksChanged([], checks.snapshot()))
        return check, checks.snapshot()

    def _exited(self, info: RankInfo, st: ContainerState) -> None:
        info.exit_code, info.ended = st.exit_code, True
        if info.stopping:  # by down: once removed its code is gone, and "removed by down" says it
            if st.exit_code is not None:
                self.board.set_state(info, "stopped", Cause("stopped_exit", st.exit_code))
            return
        # a line may be a 32 KiB piece of a longer one: the detail is a sentence, not a dump
        tail = " | ".join(line[:TAIL_CHARS] for line in list(info.last_lines)[-3:])
        if st.unstarted:
            cause = Cause("could_not_start", text=tail)
        elif st.exit_code is not None:  # with why its runtime ended it, when it says (Slurm)
            cause = Cause("exited", st.exit_code,
                          text=" | ".join(t for t in (st.lost, tail) if t) if st.lost else tail)
        elif st.lost is not None:
            cause = Cause("lost", text=st.lost + (f" | {tail}" if tail else ""))
        elif st.status == "missing":
            cause = Cause("removed_outside", text=tail)
        else:
            cause = Cause("no_exit_code", text=tail)
        when = ts_epoch(st.finished_at)
        if info.state == "failed":  # failed already (its group fell, or a fatal line)
            self.board.failed_on_its_own(info, cause, when)
            self.board.end_boot(info)  # its container is gone: so is its boot
            self._judge(info, st)
            return
        self.board.set_state(info, "failed", cause, when)
        self.board.end_boot(info)
        self._judge(info, st)

    def _judge(self, info: RankInfo, st: ContainerState) -> None:
        if self.on_exit is not None and st.exit_code != 0:
            self.on_exit(info, st.oom_killed)

    async def catch_up(self, checks: bool = True) -> None:
        """Copy into the run's files what containers wrote while no sparktui was watching
        (``checks``: fed to the checks too, as ``ingest``)."""
        run = self.board.run
        if run is None or not run.try_lock():
            return
        await together(*(self._catch_up_rank(run, i, checks) for i in self.board.ranks))
        run.unlock()

    async def _catch_up_rank(self, run: Run, info: RankInfo, checks: bool) -> None:
        """What the rank's container wrote after its cursor, to the end (it is not followed)."""
        if not info.container_id:
            return
        saved = run.cursors().get(info.rank, {})
        if saved and saved.get("container_id") not in (info.container_id, NEXT_CONTAINER):
            return  # a container this run never followed; do not mix its lines in
        cursor = await asyncio.to_thread(run.resume, info.rank, info.container_id)
        try:
            async for chunk in self.runtimes[info.node.name].logs(
                    info.container_id, cursor, follow=False, secrets=run.redactor.values):
                self.ingest(info, chunk.lines, run, checks)
                run.set_cursor(info.rank, info.container_id, chunk.cursor)
        except (RuntimeLost, NodeError, OSError) as exc:  # OSError: the run's file (a full disk)
            self.board.notice("warning", f"rank {info.rank}: could not catch up: {sentence(exc)}")

    async def close(self) -> None:
        self.closed = True
        # a copy: a restart under way drains a rank's follower (popped from ``tasks``) while
        # these are awaited (the console fuzz: "dictionary changed size during iteration")
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.tasks.clear()
        if self._saving is not None:  # before the run is unlocked (and saved) after us
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._saving
