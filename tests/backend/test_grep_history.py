"""The console's grep over a run's files (``Orchestrator.grep_history``, ``backend/history.py``):
progress while it scans, then the result; leaving early stops the scan."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sparktui.backend import history
from sparktui.backend.history import GrepProgress, ScannerPool, grep_run
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import RunScan
from sparktui.core.runstore import RunStore
from tests.runner import child_processes


def big_run(tmp_path: Path, lines: int) -> tuple[object, int]:
    run = RunStore(tmp_path).create("demo")
    for rank in range(2):
        run.log(rank).path.write_text("".join(
            f"2026-01-01T00:00:{i % 60:02d}.{i:09d}Z\t{'hit' if i % 10 == 0 else 'miss'} {i}\n"
            for i in range(lines)))
    return run, 2 * lines // 10


async def test_progress_then_the_result(tmp_path: Path) -> None:
    run, hits = big_run(tmp_path, 200_000)
    seen: list[GrepProgress] = [p async for p in grep_run(run, [0, 1], LineFilter.parse("hit"), cap=100, processes=0,
                                                          interval=0.001)]
    *during, last = seen
    assert last.result is not None and last.count == hits == last.result.total
    assert len(last.result.lines) == 100 and last.result.scanned == {0: 200_000, 1: 200_000}
    assert all(p.result is None for p in during)
    counts = [p.count for p in seen]
    assert counts == sorted(counts)  # a count that only grows


async def test_leaving_early_stops_the_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _hits = big_run(tmp_path, 200_000)
    cancelled: list[RunScan] = []
    cancel = RunScan.cancel

    def spy(scan: RunScan) -> None:
        cancelled.append(scan)
        cancel(scan)

    monkeypatch.setattr(RunScan, "cancel", spy)
    progress = grep_run(run, [0, 1], LineFilter.parse("hit"), cap=10, interval=0.001, processes=0)
    first = await anext(progress)
    assert first.result is None
    await progress.aclose()  # a new pattern: the console's worker is cancelled
    assert len(cancelled) == 1 and cancelled[0].cancelled
    assert history.PROGRESS_S == 0.1


async def test_scanner_processes_find_what_the_thread_finds(tmp_path: Path) -> None:
    run, _hits = big_run(tmp_path, 50_000)
    for pattern in ("hit", "!hit", "miss 4\\d+$"):
        f = LineFilter.parse(pattern)
        alone = [p async for p in grep_run(run, [0, 1], f, cap=1000, processes=0)][-1].result
        spread = [p async for p in grep_run(run, [0, 1], f, cap=1000, processes=2, interval=0.01)]
        assert spread[-1].result == alone and alone is not None
        assert all(p.result is None for p in spread[:-1])


async def test_leaving_early_ends_the_scanner_processes(tmp_path: Path) -> None:
    run, _hits = big_run(tmp_path, 200_000)
    progress = grep_run(run, [0, 1], LineFilter.parse("hit"), cap=10, processes=2, interval=0.001)
    await anext(progress)
    scanners = scanners_once(2)  # each started by its reader thread: maybe not yet at the first count
    assert len(scanners) == 2
    await progress.aclose()  # a new pattern: the console's worker is cancelled
    assert not [p for p in scanners if p.exists()]  # ended and waited for: not even zombies


def scanner_children() -> list[Path]:
    """This process's children running ``backend/grepscan.py``."""
    return child_processes(b"grepscan")


async def test_the_whole_count_comes_before_the_lines(tmp_path: Path) -> None:
    """Once every file is searched the count is said (the bar shows it), before the newest
    lines are made and sent: from scanner processes at once (the loop is woken, not polled:
    the interval here is longer than the test), from a thread at its next tick."""
    run, hits = big_run(tmp_path, 50_000)
    for processes, interval in ((2, 30.0), (0, 0.001)):
        seen = [p async for p in grep_run(run, [0, 1], LineFilter.parse("hit"), cap=1000,
                                          processes=processes, interval=interval)]
        assert seen[-1].result is not None and seen[-1].counted and seen[-1].count == hits
        early = [p for p in seen if p.counted and p.result is None]
        assert all(p.count == hits and p.fraction == 1.0 for p in early), processes
        if processes:
            assert len(early) == 1 and seen[-2] is early[0]
        before = seen[:seen.index(early[0])] if early else seen[:-1]
        assert not any(p.counted for p in before)


def scanners_once(count: int, timeout: float = 30) -> list[Path]:
    """This process's scanner children once there are ``count`` (the pool starts and reaps
    them in a thread of its own), or as they are when ``timeout`` ran out."""
    deadline = time.monotonic() + timeout
    while len(found := scanner_children()) != count and time.monotonic() < deadline:
        time.sleep(0.005)
    return found


def nice_of(proc: Path) -> int:
    return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[16])


async def test_scanners_started_ahead_are_used_then_made_again(tmp_path: Path) -> None:
    """The console warms the pool when its grep input opens: the scan takes those processes
    (already started and niced, waiting for a job) and, once it is done, starts as many again
    for the next pattern; cooling ends them."""
    run, hits = big_run(tmp_path, 200_000)  # a scan that outlasts its first progress
    pool = ScannerPool()
    pool.warm(2)
    try:
        ahead = {p.name for p in scanners_once(2)}
        assert len(ahead) == 2
        deadline = time.monotonic() + 30  # each renices itself first thing
        while any(nice_of(Path("/proc", pid)) != os.nice(0) + 5 for pid in ahead):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        f = LineFilter.parse("hit")
        progress = grep_run(run, [0, 1], f, cap=1000, processes=2, interval=0.001, pool=pool)
        first = await anext(progress)
        assert {p.name for p in scanner_children()} == ahead  # the scan's, none started cold
        seen = [first] + [p async for p in progress]
        alone = [p async for p in grep_run(run, [0, 1], f, cap=1000, processes=0)][-1].result
        assert seen[-1].result == alone and seen[-1].count == hits
        again = {p.name for p in scanners_once(2)}
        assert len(again) == 2 and not again & ahead
    finally:
        pool.cool()
    assert scanners_once(0) == []


async def test_a_scanner_started_ahead_ends_when_its_console_goes(tmp_path: Path) -> None:
    """An idle scanner waits on its stdin: when the console goes away (here its end of the
    pipe closes) the scanner reads the end and exits, leaving nothing behind."""
    pool = ScannerPool()
    pool.warm(1)
    scanners_once(1)
    # the process exists a moment before the pool's thread lists it as idle
    deadline = time.monotonic() + 10
    while (proc := pool.take()) is None:
        assert time.monotonic() < deadline, "the warmed scanner never became idle"
        time.sleep(0.01)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0 and proc.stdout.read() == b""
    assert pool.take() is None
    assert scanners_once(0, timeout=10) == []
