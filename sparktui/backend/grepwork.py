"""Greps over a run's files on every core: the ranks' files searched in worker processes.

The search (``core.rungrep``) holds the GIL, so threads would take turns; processes search side
by side and send their kept lines back through a pipe as frames (a length, then ``marshal``: a
few ms for ten thousand lines; for ``sparktui logs`` the lines already written, a batch of
records as one bytes object: ``rungrep.rank_lines``). ``sparktui logs`` forks its workers
(``searching``: nothing to import again) when the run is big enough to pay for a fork
(``PARALLEL_BYTES``) and it has one thread (a fork copies only the thread that calls it:
another thread's locks would stay locked in the child); the console, which has threads, starts
scanner processes (``backend/grepscan.py``).
"""

from __future__ import annotations

import contextlib
import io
import marshal
import os
import signal
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from sparktui.core import timing
from sparktui.core.blockgrep import BlockSearch
from sparktui.core.errors import SparkError
from sparktui.core.rungrep import BLOCK_BYTES, Form, Found, Line, file_size, rank_found, rank_lines

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from typing import Any

PARALLEL_BYTES = 32 << 20
"""Below this a run is searched in this process: a fork and its pipe cost about a millisecond,
and 32 MiB take some 40 ms to search."""
PIPE_BYTES = 1 << 20  # a worker runs this far ahead of the merge (Linux's default limit)
PER_CPU = 2
"""Workers per core, on a machine of two cores or more. The merge shares the cores with them:
with one worker a core, the worker whose core was also the merge's ended 11 ms after the other
(a 4-rank grep on 2 cores), the other core idle meanwhile; with two a core, the merge slows
each worker a little."""


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def groups(paths: dict[int, Path], workers: int) -> list[dict[int, Path]]:
    """The ranks in ``workers`` groups of about the same number of bytes."""
    sizes = {rank: file_size(path) for rank, path in paths.items()}
    out: list[dict[int, Path]] = [{} for _ in range(min(workers, len(paths)))]
    load = [0] * len(out)
    for rank in sorted(paths, key=lambda r: -sizes[r]):
        i = load.index(min(load))
        out[i][rank] = paths[rank]
        load[i] += sizes[rank]
    return [dict(sorted(group.items())) for group in out if group]


Batch = list[Found] | bytes | list[Line]
"""What a rank's search gives at a time: ``rank_found``'s, or ``rank_lines``' when the lines
are written where they are searched."""


class Sources(dict[int, Iterator[Batch]]):
    """Each rank's batches (``searching``), and the workers they come from."""

    def __init__(self, found: dict[int, Iterator[Batch]], workers: list[Worker]) -> None:
        super().__init__(found)
        self.workers = workers

    def read_ahead(self, until: int, cap: int) -> None:
        """Take what the workers send into their queues (they search on instead of waiting on
        a full pipe) until the file descriptor ``until`` reads (another process's end), every
        worker is done, or ``cap`` lines are held (then they wait for the reader again)."""
        import selectors

        with selectors.DefaultSelector() as watch:
            watch.register(until, selectors.EVENT_READ)
            for worker in self.workers:
                if worker.open:
                    watch.register(worker.fd, selectors.EVENT_READ, worker)
            held = 0
            while held < cap:
                for key, _events in watch.select():
                    worker = key.data
                    if worker is None:
                        return
                    held += worker._read()
                    if not worker.open:
                        watch.unregister(worker.fd)
                if len(watch.get_map()) == 1:  # only ``until`` left: every worker done
                    return


@contextlib.contextmanager
def searching(paths: dict[int, Path], search: BlockSearch, *, size: int = BLOCK_BYTES,
              workers: int | None = None, limits: dict[int, int] | None = None,
              nice: int = 0, form: Form | None = None) -> Iterator[Sources]:
    """Each rank's kept lines, a batch at a time: from worker processes when the run is big
    and this machine has the cores (``workers``: that many, whatever the size), else searched
    here. ``limits``: a rank's file read to that byte only; ``nice``: the workers' niceness
    (searching ahead of a catch-up that is the longer path: it gets the cores first); ``form``:
    the lines written so, ``rank_lines``' batches (for ``merge_lines``), else ``rank_found``'s.
    Workers are ended on the way out."""
    limits = limits or {}
    if workers is None:
        big = sum(map(file_size, paths.values())) >= PARALLEL_BYTES
        threading = sys.modules.get("threading")  # never imported: no thread was started
        alone = hasattr(os, "fork") and (threading is None or threading.active_count() == 1)
        cores = cpus()
        workers = cores * PER_CPU if big and alone and cores > 1 else 1
        if timing.enabled():
            timing.mark(f"search: {workers} workers ({threading.active_count() if threading else 1}"
                        " threads)")
    if workers < 2 or len(paths) < 2:
        yield Sources({rank: _found(path, rank, search, size, limits.get(rank), form)
                       for rank, path in paths.items()}, [])
        return
    started: list[Worker] = []
    try:
        for group in groups(paths, workers):
            started.append(Worker.start(group, search, size, limits, nice, form))
        yield Sources({rank: worker.batches(rank) for worker in started for rank in worker.ranks},
                      started)
    finally:
        for worker in started:
            worker.close()


class Worker:
    """One forked process searching some ranks' files; frames on its pipe are
    ``marshal``-ed ``(rank, batch)`` (a ``rank_lines`` batch of records: one bytes object, a
    copy each way), ``(rank, None)`` once a rank is done, and
    ``(-1, sentence)`` if it failed."""

    def __init__(self, pid: int, fd: int, ranks: list[int]) -> None:
        self.pid = pid
        self.fd = fd
        self.ranks = ranks
        self.reader = io.BufferedReader(io.FileIO(fd, "r"), PIPE_BYTES)
        self.queues: dict[int, deque[Batch]] = {rank: deque() for rank in ranks}
        self.open = set(ranks)
        self.done = False

    @classmethod
    def start(cls, group: dict[int, Path], search: BlockSearch, size: int,
              limits: dict[int, int] | None = None, nice: int = 0,
              form: Form | None = None) -> Worker:
        read_fd, write_fd = os.pipe()
        with contextlib.suppress(AttributeError, OSError):  # a larger pipe: fewer stalls
            import fcntl

            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        pid = os.fork()
        if pid == 0:  # the worker: search, send, and never return into the caller's code
            os.close(read_fd)
            if nice:
                with contextlib.suppress(OSError):
                    os.nice(nice)
            os._exit(_serve(write_fd, group, search, size, limits or {}, form))
        os.close(write_fd)
        return cls(pid, read_fd, list(group))

    def batches(self, rank: int) -> Iterator[Batch]:
        queue = self.queues[rank]
        while True:
            while not queue and rank in self.open:
                self._read()
            if not queue:
                return
            yield queue.popleft()

    def _read(self) -> int:
        """One frame into its rank's queue; returns its lines."""
        head = self.reader.read(4)
        frame = self.reader.read(int.from_bytes(head, "little")) if len(head) == 4 else b""
        if not frame:
            raise SparkError("a grep worker ended before its files did")
        rank, batch = marshal.loads(frame)
        if rank < 0:
            raise SparkError(f"grep failed: {batch}")
        if batch is None:
            self.open.discard(rank)
            return 0
        self.queues[rank].append(batch)
        return len(batch)

    def close(self) -> None:
        """Wait for the worker; end it first if it still has lines to send (the reader left
        early: ``| head``, an error, ^C)."""
        if self.done:
            return
        self.done = True
        self.reader.close()
        if self.open:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _serve(fd: int, group: dict[int, Path], search: BlockSearch, size: int,
           limits: dict[int, int], form: Form | None) -> int:
    """The worker's whole life: its ranks' batches in turn (so the merge, which needs every
    rank, never waits on one while another fills the pipe), then an exit status."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # ^C reaches the whole group: just end
    out = io.FileIO(fd, "w")
    try:
        streams = {rank: _found(path, rank, search, size, limits.get(rank), form)
                   for rank, path in group.items()}
        while streams:
            for rank in list(streams):
                batch = next(streams[rank], None)
                _send(out, frame((rank, batch)))
                if batch is None:
                    del streams[rank]
        return 0
    except BrokenPipeError:  # the reader went away
        return 1
    except BaseException as exc:  # said to the reader, which raises it
        with contextlib.suppress(OSError):
            _send(out, frame((-1, f"{type(exc).__name__}: {exc}"[:500])))
        return 2


def _found(path: Path, rank: int, search: BlockSearch, size: int, limit: int | None,
           form: Form | None) -> Iterator[Batch]:
    if form is None:
        return rank_found(path, rank, search, size=size, limit=limit)
    return rank_lines(path, rank, search, form, size=size, limit=limit)


def _send(out: io.FileIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = out.write(view)
        view = view[written or 0:]


def frame(obj: Any) -> bytes:
    """One frame of the workers' pipes: a 4-byte length, then ``obj`` marshalled."""
    data = marshal.dumps(obj)
    return len(data).to_bytes(4, "little") + data
