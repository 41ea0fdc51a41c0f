"""A grep over everything a run captured, for the console: in a thread, with a live count.

The console keeps only a window of each rank's newest lines in memory; a grep must see the rest,
which is in the run's files. The search itself is ``core.rungrep`` (a compiled regex over blocks
of a few hundred KiB); it runs in a thread so the event loop keeps serving keys and screens
between blocks (each block holds the GIL for well under a millisecond). Progress comes out
every ``interval`` seconds as a ``GrepProgress`` (the count so far), then once with the result.
Leaving the iteration (a new pattern, the console closing) stops the thread at its next block.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import BlockSearch, RunScan, ScanResult
from sparktui.core.runstore import Run

PROGRESS_S = 0.1  # a count on screen ten times a second


@dataclass(frozen=True)
class GrepProgress:
    """How far a grep over a run's files got: kept lines so far, the share of bytes read, and
    once done the result (the newest ``cap`` kept lines, the total, where each rank ended)."""

    count: int
    fraction: float
    result: ScanResult | None = None


async def grep_run(run: Run, ranks: list[int], line_filter: LineFilter, *, cap: int,
                   interval: float = PROGRESS_S) -> AsyncIterator[GrepProgress]:
    paths = {rank: run.log(rank).path for rank in ranks}
    scan = RunScan(paths, BlockSearch.of(line_filter), cap)
    task = asyncio.ensure_future(asyncio.to_thread(scan.run))
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: never "lost"
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                yield GrepProgress(scan.count, 1.0, task.result())
                return
            yield GrepProgress(scan.count, scan.fraction)
    finally:
        scan.cancel()
