"""``sparktui logs``: a run's captured lines, every rank merged in capture order, grepped with the
console's grep (``core.linefilter``) at the pace of ``grep`` (``core.rungrep``).

A run that ended (``down`` removed every container: the run's events say so) is read straight
from its files: nothing can add a line, so there is nothing to connect to, and this module
imports no more than it needs for that (no recipe models, Rich or backend; ``bench/grep.py``
measures the whole command against ``grep -E``). Any other run is caught up from its containers
first, through the Orchestrator (``sparktui.cli.ops``, imported only then: this module needs
it, it needs nothing from here), then read the same way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from sparktui.core.blockgrep import BlockSearch
from sparktui.core.controls import visible, visible_bytes
from sparktui.core.errors import SparkError
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import Found, merge_found, norm_ts
from sparktui.core.runstore import Run

TYPE_CHECKING = False  # ``typing`` is not imported on the path of an ended run (2 ms)
if TYPE_CHECKING:
    from sparktui.backend.events import Event


def cmd_logs(args: argparse.Namespace) -> int:
    line_filter = LineFilter.require(args.grep or "")  # the console's grep: smart case, ! inverts
    cutoff = since_cutoff(args.since)
    search = BlockSearch.of(line_filter)
    if not args.follow:
        run = _ended_run(args)
        if run is not None:
            print_run(run, search, rank=args.rank, cutoff=cutoff, timestamps=args.timestamps,
                      raw=args.raw)
            args.leave_at_once = True  # nothing to close: the process may end without teardown
            return 0
    return logs_attached(args, search, cutoff)


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

    async def caught_up() -> Run:
        async with _opened(args, attach=True, checks=False) as orch:
            return _the_run(orch.run or orch.store.latest(orch.recipe.slug), orch.recipe.slug,
                            not_yours(orch))

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
            orch.start_following()
            while True:
                await asyncio.sleep(3600)
    try:
        if args.follow:
            return _run(go())
        run = asyncio.run(caught_up())
        mark("logs: closed")
        print_run(run, search, rank=args.rank, cutoff=cutoff, timestamps=args.timestamps,
                  raw=args.raw)
        mark("logs: printed")
        return 0
    except KeyboardInterrupt:
        return 0


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


def _ended_run(args: argparse.Namespace) -> Run | None:
    """The recipe's latest run when it ended; None when that takes more than its files (no
    such recipe or run, or containers that may still write: the Orchestrator finds out)."""
    from sparktui.config import recipes_dirs, state_dir
    from sparktui.core.names import is_safe
    from sparktui.core.recipefiles import locate, slug_for
    from sparktui.core.runstore import RunStore

    try:
        path = locate(args.recipe, recipes_dirs(args.recipes))
        if path is None or not is_safe(slug := slug_for(path)):
            return None
        run = RunStore(state_dir()).latest(slug)
    except (OSError, RuntimeError, SparkError):  # the slow way says what is wrong, in full
        return None
    return run if run is not None and run.ended() else None


def print_run(run: Run, search: BlockSearch, *, rank: int | None, cutoff: bytes | None,
              timestamps: bool, raw: bool = False) -> None:
    """The run's kept lines, ``r<rank> <text>``, as they are found; control characters written
    out as ``\\x1b`` unless ``raw`` (a container's text may retitle or clear the terminal)."""
    from sparktui.backend.grepwork import searching

    paths = run.rank_paths()
    if rank is not None:
        paths = {rank: paths[rank]} if rank in paths else {}
    sys.stdout.flush()  # nothing buffered is copied into a worker
    with searching(paths, search) as sources:
        write_found(merge_found(sources), cutoff=cutoff, timestamps=timestamps, raw=raw)


def write_found(batches: Iterable[list[Found]], *, cutoff: bytes | None, timestamps: bool,
                raw: bool = False) -> None:
    """Lines as the engine wrote them (data, like ``docker logs``: never markup), UTF-8, their
    control characters visible unless ``raw``."""
    out = sys.stdout.buffer
    names = _Names()
    for batch in batches:
        if cutoff is not None:
            batch = [found for found in batch if found[0] >= cutoff]
        if timestamps:  # one concatenation a line: half the time of a list of parts
            lines = [names[rank] + key[11:23] + b" " + text for key, rank, _place, text in batch]
        else:
            lines = [names[rank] + text for _key, rank, _place, text in batch]
        if not lines:
            continue
        lines.append(b"")
        chunk = b"\n".join(lines)
        out.write(chunk if raw else visible_bytes(chunk))
        out.flush()


class _Names(dict[int, bytes]):
    """``r<rank> `` for each rank, made once."""

    def __missing__(self, rank: int) -> bytes:
        name = self[rank] = b"r%d " % rank
        return name
