"""``sparktui logs``: a run's captured lines, every rank merged in capture order, grepped with the
console's grep (``core.linefilter``) at the pace of ``grep`` (``core.rungrep``).

A run that ended (``down`` removed every container: the run's events say so) is read straight
from its files: nothing can add a line, so there is nothing to connect to, and this module
imports no more than it needs for that (no recipe models, Rich or backend; ``bench/grep.py``
measures the whole command against ``grep -E``). So is a live run that a console or a
``watch`` follows (it writes the files as the containers write). Any other run is caught up from
its containers first, through the Orchestrator (``sparktui.cli.ops``, imported only then: this
module needs it, it needs nothing from here), then read the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from sparktui.core.blockgrep import BlockSearch
from sparktui.core.controls import visible
from sparktui.core.errors import SparkError
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import Form, Line, end_print, merge_lines, norm_ts, rank_lines
from sparktui.core.runstore import Run

TYPE_CHECKING = False  # ``typing`` is not imported on the path of an ended run (2 ms)
if TYPE_CHECKING:
    from sparktui.backend.events import Event


AHEAD_LINES = 1_000_000
"""Kept lines the search of a live run's files may hold before the catch-up ends (then its
workers wait for the merge, as for a run that ended)."""
AHEAD_NICE = 19
"""The niceness of the workers searching ahead: the catch-up's imports and connects are the
longer path, so they get the cores first and the search takes what they leave."""


def cmd_logs(args: argparse.Namespace) -> int:
    line_filter = LineFilter.require(args.grep or "")  # the console's grep: smart case, ! inverts
    cutoff = since_cutoff(args.since)
    search = BlockSearch.of(line_filter)
    if not args.follow:
        run, ended = _latest_run(args)
        if run is not None and ended:
            print_run(run, search, rank=args.rank, cutoff=cutoff, timestamps=args.timestamps,
                      raw=args.raw)
            args.leave_at_once = True  # nothing to close: the process may end without teardown
            return 0
        if run is not None:
            # a console or a watch writes the run's files as the containers write: what a
            # catch-up would copy is there already (nor would one copy anything: the follower
            # holds the run), so the files are read as an ended run's, to where they stand now
            if run.followed_elsewhere() and (limits := _settled(_paths(run, args.rank))) is not None:
                print_run(run, search, rank=args.rank, cutoff=cutoff, timestamps=args.timestamps,
                          raw=args.raw, limits=limits)
                args.leave_at_once = True
                return 0
            try:
                return logs_ahead(args, run, search, cutoff)
            except KeyboardInterrupt:  # as ``logs_attached`` ends on ^C
                return 0
    return logs_attached(args, search, cutoff)


def logs_ahead(args: argparse.Namespace, run: Run, search: BlockSearch,
               cutoff: bytes | None) -> int:
    """``sparktui logs`` of a live run, its files searched while it is caught up: the lines the
    files hold now are searched by the workers while another process (forked: nothing to import
    again) imports the backend, connects and catches up; then only what the catch-up added is
    searched, and every rank's lines are merged and written as ``print_run`` writes them. When
    the catch-up took another run, added or rewrote a rank's file (its inode, or the 4 KiB
    before where the search stopped, differ), the search starts over on what is there: the
    same lines either way. Nothing is written before the catch-up ended (a failure prints no
    line, as before)."""
    import itertools

    from sparktui.backend.grepwork import searching
    from sparktui.core.timing import mark

    paths = _paths(run, args.rank)
    ends = {rank: _whole_lines(path) for rank, path in paths.items()}
    if any(end is None for end in ends.values()):
        return logs_attached(args, search, cutoff)
    limits = {rank: end[0] for rank, end in ends.items() if end is not None}
    sys.stdout.flush()  # nothing buffered is copied into a worker or the catch-up
    sys.stderr.flush()
    form = Form(timestamps=args.timestamps, raw=args.raw)
    with searching(paths, search, limits=limits, nice=AHEAD_NICE, form=form) as sources:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the catch-up: connect, copy what the containers wrote, say which run
            os.close(read_fd)
            for worker in sources.workers:
                os.close(worker.fd)
            os._exit(_catch_up_here(args, write_fd))
        os.close(write_fd)
        try:
            sources.read_ahead(read_fd, AHEAD_LINES)
            told = b""
            while chunk := os.read(read_fd, 65536):
                told += chunk
        finally:
            os.close(read_fd)
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        mark("logs: caught up (in its own process)")
        if code:  # the catch-up said why on stderr
            return code if code > 0 else 128 - code
        run_id, _, folder = told.decode("utf-8", "surrogateescape").partition("\n")
        caught = Run(run_id, Path(folder))
        now = _paths(caught, args.rank)
        if caught.dir == run.dir and now.keys() == paths.keys() and all(
                _whole_lines(path, limits[rank]) == ends[rank] for rank, path in paths.items()):
            found: dict[int, Iterator[bytes | list[Line]]] = {
                rank: itertools.chain(sources[rank], rank_lines(path, rank, search, form,
                                                                start=limits[rank]))
                for rank, path in now.items()}  # what was there, then what the catch-up added
            write_lines(merge_lines(found, cutoff=cutoff))
            mark("logs: printed")
            args.leave_at_once = True
            return 0
    mark("logs: the files changed under the search: searched again")
    print_run(caught, search, rank=args.rank, cutoff=cutoff, timestamps=args.timestamps,
              raw=args.raw)
    args.leave_at_once = True
    return 0


def _catch_up_here(args: argparse.Namespace, fd: int) -> int:
    """The catch-up's process: its run's id and folder on ``fd``; an error said as ``main``
    says it, its exit status returned."""
    from sparktui.cli import _report

    try:
        run = caught_up(args)
        os.write(fd, f"{run.id}\n{run.dir}".encode("utf-8", "surrogateescape"))
        return 0
    except SparkError as exc:
        return _report(exc)
    except KeyboardInterrupt:
        return 130
    except BaseException:  # as the interpreter would say it
        import traceback

        traceback.print_exc()
        return 1
    finally:
        sys.stderr.flush()


def _paths(run: Run, rank: int | None) -> dict[int, Path]:
    paths = run.rank_paths()
    if rank is not None:
        paths = {rank: paths[rank]} if rank in paths else {}
    return paths


SETTLE_TRIES = 20
SETTLE_S = 0.005


def _settled(paths: dict[int, Path]) -> dict[int, int] | None:
    """Each file's size where it ends with a whole line, the follower's batch being written
    waited for (up to ``SETTLE_TRIES`` looks, ``SETTLE_S`` apart); None when one never did."""
    import time

    limits: dict[int, int] = {}
    for rank, path in paths.items():
        for _ in range(SETTLE_TRIES):
            end = _whole_lines(path)
            if end is not None:
                limits[rank] = end[0]
                break
            time.sleep(SETTLE_S)
        else:
            return None
    return limits


def _whole_lines(path: Path, size: int | None = None) -> tuple[int, int, str] | None:
    """``(size, inode, the digest of the bytes before)`` of the file's first ``size`` bytes
    (default: all of it), when they end with a newline (or are none); else None (a line being
    written)."""
    try:
        st = path.stat()
    except OSError:
        return None
    size = st.st_size if size is None else size
    if size > st.st_size:
        return None
    printed = end_print(path, size) if size else ("", True)
    if printed is None or not printed[1]:
        return None
    return size, st.st_ino, printed[0]


def logs_attached(args: argparse.Namespace, search: BlockSearch, cutoff: bytes | None) -> int:
    """``sparktui logs`` of a run whose containers may still write: connected, caught up from
    them, then read as a run that ended is (``print_run``); ``--follow`` goes on live.

    Without ``--follow`` the boot checks are not replayed (nothing here shows them), and the
    files are searched once the connections and the event loop are closed: with no thread left,
    the search forks its workers (``grepwork.searching``), as for a run that ended."""
    import asyncio

    from sparktui.backend.events import LogBatch
    from sparktui.cli.ops import _opened, _run, not_yours  # connects: the backend
    from sparktui.core.timing import mark

    mark("cli: logs (interpreter, imports, arguments done; the backend imported)")

    line_filter = search.line_filter

    def wanted(rank: int, ts: str, text: str) -> bool:
        if args.rank is not None and rank != args.rank:
            return False
        if cutoff and norm_ts(ts).encode() < cutoff:
            return False
        return line_filter.matches(text)

    async def go() -> int:
        async with _opened(args, attach=True) as orch:
            run = _the_run(orch.run or orch.store.latest(orch.recipe.slug), orch.recipe.slug,
                           not_yours(orch))
            print_run(run, search, rank=args.rank, cutoff=cutoff, timestamps=args.timestamps,
                      raw=args.raw)
            mark("logs: printed")

            def live(event: Event) -> None:
                if isinstance(event, LogBatch):
                    for _no, ts, text in event.lines:
                        if wanted(event.rank, ts, text):
                            stamp = f"{norm_ts(ts)[11:23]} " if args.timestamps else ""
                            sys.stdout.write(f"r{event.rank} {stamp}{text if args.raw else visible(text)}\n")
                    sys.stdout.flush()
            orch.subscribe(live)
            orch.who = "sparktui logs --follow"
            orch.start_following()
            while True:
                await asyncio.sleep(3600)
    try:
        if args.follow:
            return _run(go())
        run = caught_up(args)
        mark("logs: closed")
        print_run(run, search, rank=args.rank, cutoff=cutoff, timestamps=args.timestamps,
                  raw=args.raw)
        mark("logs: printed")
        return 0
    except KeyboardInterrupt:
        return 0


def caught_up(args: argparse.Namespace) -> Run:
    """The recipe's run its containers write to, what they wrote meanwhile copied into its
    files; the boot checks neither replayed nor fed (no verdict is shown), every connection and
    the event loop closed on return."""
    import asyncio

    from sparktui.cli.ops import _opened, not_yours  # connects: the backend

    async def go() -> Run:
        async with _opened(args, attach=True, checks=False) as orch:
            return _the_run(orch.run or orch.store.latest(orch.recipe.slug), orch.recipe.slug,
                            not_yours(orch))
    return asyncio.run(go())


def _the_run(run: Run | None, slug: str, held: str) -> Run:
    if run is None:
        raise SparkError(f"no run of {slug} of yours yet{held}: start one with sparktui up")
    return run


def since_cutoff(since: str | None) -> bytes | None:
    """``--since``: the oldest time stamp shown, normalised as the lines' are (``norm_ts``)."""
    if not since:
        return None
    from datetime import datetime, timedelta, timezone

    from sparktui.core.units import parse_duration

    try:
        seconds = parse_duration(since)
    except ValueError:
        raise SparkError(f"--since {since!r}: use a duration such as 10m or 90s") from None
    t = datetime.now(timezone.utc) - timedelta(seconds=seconds)
    return norm_ts(t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")).encode()


def _latest_run(args: argparse.Namespace) -> tuple[Run | None, bool]:
    """The recipe's latest run and whether it ended; None when that takes more than its files
    (no such recipe or run: the Orchestrator finds out and says what is wrong, in full)."""
    from sparktui.config import recipes_dirs, state_dir
    from sparktui.core.names import is_safe
    from sparktui.core.recipefiles import locate, slug_for
    from sparktui.core.runstore import RunStore

    try:
        path = locate(args.recipe, recipes_dirs(args.recipes))
        if path is None or not is_safe(slug := slug_for(path)):
            return None, False
        run = RunStore(state_dir()).latest(slug)
        return run, run is not None and run.ended()
    except (OSError, RuntimeError, SparkError):
        return None, False


def print_run(run: Run, search: BlockSearch, *, rank: int | None, cutoff: bytes | None,
              timestamps: bool, raw: bool = False, limits: dict[int, int] | None = None) -> None:
    """The run's kept lines, ``r<rank> <text>``, as they are found; control characters written
    out as ``\\x1b`` unless ``raw`` (a container's text may retitle or clear the terminal).
    ``limits``: a rank's file read to that byte only (a file a follower still writes)."""
    from sparktui.backend.grepwork import searching

    paths = run.rank_paths()
    if rank is not None:
        paths = {rank: paths[rank]} if rank in paths else {}
    sys.stdout.flush()  # nothing buffered is copied into a worker
    with searching(paths, search, limits=limits, form=Form(timestamps=timestamps, raw=raw)) as sources:
        write_lines(merge_lines(sources, cutoff=cutoff))


def write_lines(chunks: Iterable[bytes]) -> None:
    """Lines as the engine wrote them (data, like ``docker logs``: never markup), UTF-8, their
    control characters made visible where they were searched (``rungrep.rank_lines``)."""
    out = sys.stdout.buffer
    for chunk in chunks:
        out.write(chunk)
        out.flush()
