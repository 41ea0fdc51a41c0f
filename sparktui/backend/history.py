"""A grep over everything a run captured, for the console, with a live count.

The console keeps only a window of each rank's newest lines in memory; a grep must see the rest,
which is in the run's files. The search is ``core.rungrep``. A small run is scanned in a thread
(``asyncio.to_thread``); a big one (``PROCESS_BYTES``) by scanner processes, one per group of
ranks and at most one per core (``backend/grepscan.py``): in a thread the scan held the GIL
half the time, so it ran at half speed on one core while every key waited for it
(docs/benchmarks.md). Progress comes out every ``interval`` seconds as a ``GrepProgress`` (the
count so far), the whole count as soon as every file is searched (making and sending the newest
lines takes a while more), then once with the result. Leaving the iteration (a new pattern, the
console closing) stops the scan: the thread at its next block, the processes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import marshal
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path

from sparktui.backend.grepscan import NICE
from sparktui.backend.grepwork import cpus, groups
from sparktui.core.blockgrep import BlockSearch
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import LogLine, RunScan, ScanResult, file_size
from sparktui.core.runstore import Run

PROGRESS_S = 0.1  # a count on screen ten times a second
PROCESS_BYTES = 16 << 20
"""From this size on a scan runs in processes: starting one costs some 40 ms; 16 MiB take about
as long to scan."""


@dataclass(frozen=True)
class GrepProgress:
    """How far a grep over a run's files got: kept lines so far, the share of bytes read; once
    every file is searched the whole count (``counted``: the newest lines take a while more to
    make and send), then the result (the newest ``cap`` kept lines, the total, where each rank
    ended)."""

    count: int
    fraction: float
    result: ScanResult | None = None
    counted: bool = False  # ``count`` is the whole run's: every file searched (the lines follow)


Progress = AsyncGenerator[GrepProgress, None]


def grep_run(run: Run, ranks: list[int], line_filter: LineFilter, *, cap: int,
             interval: float = PROGRESS_S, processes: int | None = None,
             pool: ScannerPool | None = None) -> Progress:
    """``processes``: scan in that many scanner processes (0: a thread), whatever the size;
    ``pool``: scanners started ahead (``ScannerPool``), taken first and made again after."""
    paths = {rank: run.log(rank).path for rank in ranks}
    if processes is None:
        processes = scanners_for(paths)
    if processes:
        return _in_processes(paths, line_filter, cap, processes, interval, pool)
    return _in_thread(paths, line_filter, cap, interval)


def scanners_for(paths: dict[int, Path]) -> int:
    """Scanner processes for a grep over these files: one per core at most, none (a thread)
    for a small run."""
    big = sum(file_size(path) for path in paths.values()) >= PROCESS_BYTES
    return min(cpus(), len(paths)) if big else 0


class ScannerPool:
    """Scanner processes started before a grep needs them (the console warms it when the grep
    input opens): a scanner's interpreter and imports took 34 ms of the whole count's 0.17 s
    (docs/benchmarks.md). An idle scanner waits on its stdin for a job, niced; one whose
    console goes away reads the end of its stdin and exits. Processes are started and reaped
    in a thread of the pool's own: a fork and an exec are no work for the event loop."""

    def __init__(self) -> None:
        self.size = 0  # how many to keep ready; 0: none (``cool``)
        self._idle: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()  # the event loop takes and cools; the pool's thread starts

    def warm(self, count: int) -> None:
        """Keep ``count`` scanners ready from now on (started at once, in the background)."""
        with self._lock:
            self.size = count
        self.refill()

    def refill(self) -> None:
        """Start, in the background, as many as are missing."""
        threading.Thread(target=self._refill, name="grep-scanners", daemon=True).start()

    def _refill(self) -> None:
        while True:
            with self._lock:
                self._idle = [proc for proc in self._idle if proc.poll() is None]
                if len(self._idle) >= self.size:
                    return
            proc = start_scanner()
            with self._lock:
                wanted = len(self._idle) < self.size  # cooled, or filled by another start
                if wanted:
                    self._idle.append(proc)
            if not wanted:
                _reap([proc])
                return

    def take(self) -> subprocess.Popen[bytes] | None:
        with self._lock:
            while self._idle:
                proc = self._idle.pop(0)
                if proc.poll() is None:
                    return proc
        return None

    def cool(self) -> None:
        """End the idle scanners (reaped in the background); keep none ready until warmed."""
        with self._lock:
            self.size = 0
            idle, self._idle = self._idle, []
        if idle:
            threading.Thread(target=_reap, args=(idle,), name="grep-scanners", daemon=True).start()


def _reap(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


async def _in_thread(paths: dict[int, Path], line_filter: LineFilter, cap: int,
                     interval: float) -> AsyncGenerator[GrepProgress, None]:
    scan = RunScan(paths, BlockSearch.of(line_filter), cap)
    task = asyncio.ensure_future(asyncio.to_thread(scan.run))
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: never "lost"
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                yield GrepProgress(scan.count, 1.0, task.result(), counted=True)
                return
            yield GrepProgress(scan.count, 1.0 if scan.counted else scan.fraction,
                               counted=scan.counted)
    finally:
        scan.cancel()


class _Scanner:
    """One scanner process (taken from the pool, or started by its reader thread: a fork and an
    exec are no work for the event loop), read by a thread of its own (blocking reads let go of
    the GIL) that keeps what it said so far and waits for its end: no asyncio child watcher,
    whose threads race ``subprocess``'s own reaping on Python 3.11 ("Unknown child process pid
    ...")."""

    def __init__(self, group: dict[int, Path], line_filter: LineFilter, cap: int,
                 counted: Callable[[], None], proc: subprocess.Popen[bytes] | None = None) -> None:
        self.count = 0
        self.done_bytes = 0
        self.counted = False
        self.on_counted = counted  # called from the reader thread
        self.result: tuple[list[LogLine], int, dict[int, int]] | None = None
        self.error: str | None = None
        self.proc = proc
        self.ended = False
        self._lock = threading.Lock()  # the reader thread starts the process; ``end`` may come first
        self.job = json.dumps({"pattern": line_filter.text, "cap": cap,
                               "paths": {str(r): str(p) for r, p in group.items()}}).encode()

    def listen(self) -> None:
        """In a thread: the process started if none was given, the job in, frames out, until
        the scanner ends (or is ended)."""
        with self._lock:
            if self.ended:  # ended before it began: a process taken from the pool is reaped
                if self.proc is not None:
                    _reap([self.proc])
                return
            proc = self.proc = self.proc or start_scanner()
        stdin, stdout = proc.stdin, proc.stdout
        assert stdin is not None and stdout is not None
        try:
            with contextlib.suppress(BrokenPipeError):
                stdin.write(self.job)
                stdin.close()
            while True:
                head = stdout.read(4)
                body = stdout.read(int.from_bytes(head, "little")) if len(head) == 4 else b""
                if not body:
                    break
                said = marshal.loads(body)
                if said[0] == "p":
                    self.count, self.done_bytes = said[1], said[2]
                elif said[0] == "c":
                    self.count, self.done_bytes, self.counted = said[1], said[2], True
                    self.on_counted()
                elif said[0] == "r":
                    self.result = (said[1], said[2], {int(k): v for k, v in said[3].items()})
                    self.count = said[2]
                else:
                    self.error = str(said[1])
        finally:
            stdout.close()
            proc.wait()

    def end(self) -> None:
        with self._lock:
            self.ended = True
            proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()


def scanner_command() -> list[str]:
    """``python -I``: nothing from the environment or the working folder is imported; this
    sparktui's own folder is put first, so the scanner runs the console's code. Niced before
    its imports: a scanner started ahead never takes a core from the screen."""
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds sparktui/
    code = (f"import os, sys\ntry: os.nice({NICE})\nexcept OSError: pass\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from sparktui.backend.grepscan import main\nsys.exit(main())")
    return [sys.executable, "-I", "-c", code, root]


def start_scanner() -> subprocess.Popen[bytes]:
    """A scanner process, waiting for its job on stdin."""
    return subprocess.Popen(scanner_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


async def _in_processes(paths: dict[int, Path], line_filter: LineFilter, cap: int, processes: int,
                        interval: float, pool: ScannerPool | None) -> AsyncGenerator[GrepProgress, None]:
    total = sum(file_size(path) for path in paths.values()) or 1
    scanners: list[_Scanner] = []
    listening: list[asyncio.Future[None]] = []
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()  # a scanner's whole count came: say it at once, not at the next tick

    def counted() -> None:
        loop.call_soon_threadsafe(woken.set)

    try:
        for group in groups(paths, processes):
            scanners.append(_Scanner(group, line_filter, cap, counted,
                                     pool.take() if pool is not None else None))
            listening.append(asyncio.ensure_future(asyncio.to_thread(scanners[-1].listen)))
        readers: set[asyncio.Future[None]] = set(listening)
        said_counted = False
        while readers:
            waker = asyncio.ensure_future(woken.wait())
            try:
                done, _ = await asyncio.wait(readers | {waker}, timeout=interval,
                                             return_when=asyncio.FIRST_COMPLETED)
            finally:  # a new pattern may end this scan here: no waker left pending
                waker.cancel()
            woken.clear()
            for task in done - {waker}:
                task.result()
                readers.discard(task)
            if not said_counted and all(s.counted for s in scanners):
                said_counted = True
                yield GrepProgress(sum(s.count for s in scanners), 1.0, counted=True)
            elif readers and not said_counted:
                yield GrepProgress(sum(s.count for s in scanners),
                                   min(1.0, sum(s.done_bytes for s in scanners) / total))
        failed = [s.error or "a grep scanner ended before its files did" for s in scanners
                  if s.result is None]
        if failed:
            raise RuntimeError(failed[0])
        results = [s.result for s in scanners if s.result is not None]
        lines = list(heapq.merge(*(lines for lines, _kept, _scanned in results)))
        scanned = {rank: no for _lines, _kept, per_rank in results for rank, no in per_rank.items()}
        kept = sum(kept for _lines, kept, _scanned in results)
        if pool is not None:  # ready for the next pattern (not while this scan ran: two cores)
            pool.refill()
        yield GrepProgress(kept, 1.0, ScanResult(lines[-cap:] if cap > 0 else [], kept, scanned),
                           counted=True)
    finally:
        for scanner in scanners:
            scanner.end()  # its reader thread sees the pipe close and reaps it
        await asyncio.gather(*listening, return_exceptions=True)
