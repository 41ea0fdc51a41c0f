"""The log lines the console keeps in memory: a bounded window per rank.

The run's files (``r<rank>.log``) keep every line; the window keeps the newest ``window`` lines
of each rank for display. Scanning everything (grep over lines that left the window) reads the
files, in a thread.

The store also knows which lines of each window are the engine's access-log lines of sparktui's
own health probes (``is_probe_line``), so the console can hide them and say how many it hid.
Each line is checked once, the first time anyone asks about its rank.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Final, NamedTuple

from sparktui.core.linefilter import LineFilter
from sparktui.core.runstore import Run

LogLine = tuple[str, int, int, str]
"""One captured line: ``(ts, rank, no, text)``, read with ``line[TEXT]`` and so on.

``ts`` is the capture time, RFC 3339 UTC with nanoseconds (see ``norm_ts``); ``no`` the line
number in the run's file of that rank, from 1. Tuples compare in capture order: time, then rank,
then line number. A plain tuple on purpose, not a NamedTuple: CPython stops tracking a tuple of
strings and ints in its cycle collector after the first collection, but keeps tracking every
instance of a tuple subclass. The windows hold tens of thousands of lines; tracked, each full
collection walked them all and stopped the console for 200-300 ms under a log flood
(docs/benchmarks.md, UI flood).
"""
TS: Final = 0
RANK: Final = 1
NO: Final = 2
TEXT: Final = 3


_PROBE_HINT = '"GET /'
_PROBE_REQUESTS = ('"GET /health HTTP/', '"GET /v1/models HTTP/')


def is_probe_line(text: str) -> bool:
    """An access-log line of a health probe as uvicorn (SGLang, vLLM, the demo engine) prints
    it: ``INFO:     127.0.0.1:54321 - "GET /health HTTP/1.1" 200 OK``. Most lines fail the
    first, cheap test."""
    return _PROBE_HINT in text and any(r in text for r in _PROBE_REQUESTS)


def norm_ts(ts: str) -> str:
    """``2026-01-01T12:00:05.100000000Z``: docker trims trailing zeros off the fraction and the
    local runtime writes microseconds; padded to nanoseconds, times sort as text."""
    if len(ts) == 30 and ts[19] == ".":
        return ts
    base, _, frac = ts.rstrip("Z").partition(".")
    return f"{base[:19]}.{frac[:9].ljust(9, '0')}Z"


def line_of(rank: int, no: int, ts: str, text: str) -> LogLine:
    return (norm_ts(ts), rank, no, text)


def merge(streams: Iterable[Iterable[LogLine]]) -> list[LogLine]:
    """Lines of several ranks in capture order."""
    return list(heapq.merge(*streams))


class LogStore:
    def __init__(self, world: int = 0, window: int = 10_000) -> None:
        self.window = window
        self.run_id: str | None = None
        self._lines: dict[int, deque[LogLine]] = {}
        self._probes: dict[int, deque[int]] = {}  # rank -> line numbers of probe lines, in window
        self._checked: dict[int, int] = {}  # rank -> the last line number checked for a probe
        self.reset(None, world)

    def reset(self, run_id: str | None, world: int) -> None:
        self.run_id = run_id
        self._lines = {r: deque(maxlen=self.window) for r in range(world)}
        self._probes = {}
        self._checked = {}

    @property
    def world(self) -> int:
        return len(self._lines)

    def lines(self, rank: int) -> deque[LogLine]:
        return self._lines.setdefault(rank, deque(maxlen=self.window))

    def last_no(self, rank: int) -> int:
        lines = self._lines.get(rank)
        return lines[-1][NO] if lines else 0

    def add(self, rank: int, lines: Iterable[tuple[int, str, str]]) -> list[LogLine]:
        """Append what is new (by line number); returns the lines added."""
        window = self.lines(rank)
        last = window[-1][NO] if window else 0
        added = [line_of(rank, no, ts, text) for no, ts, text in lines if no > last]
        window.extend(added)
        return added

    def complete(self, rank: int) -> bool:
        """Whether the window still holds the rank's first line (nothing was dropped)."""
        window = self._lines.get(rank)
        return not window or window[0][NO] == 1

    def total(self, ranks: Iterable[int]) -> int:
        return sum(len(self.lines(r)) for r in ranks)

    def view(self, ranks: list[int], *, hide_probes: bool = False) -> list[LogLine]:
        """The ranks' windows in capture order; ``hide_probes``: without probe lines."""
        if hide_probes:
            if len(ranks) == 1:
                return list(self._without_probes(ranks[0]))
            return merge(self._without_probes(r) for r in ranks)
        return merge(self.lines(r) for r in ranks) if len(ranks) > 1 else list(self.lines(ranks[0]))

    # -- the health probes' access-log lines ----------------------------------------------------
    def probe_nos(self, rank: int) -> deque[int]:
        """Line numbers of the probe lines in ``rank``'s window, oldest first (checking the
        lines that arrived since the last call)."""
        window = self.lines(rank)
        probes = self._probes.setdefault(rank, deque())
        checked = self._checked.get(rank, 0)
        if window and window[-1][NO] > checked:
            found = []
            for line in reversed(window):
                if line[NO] <= checked:
                    break
                if _PROBE_HINT in line[TEXT] and is_probe_line(line[TEXT]):
                    found.append(line[NO])
            probes.extend(reversed(found))
            self._checked[rank] = window[-1][NO]
        first = window[0][NO] if window else checked + 1
        while probes and probes[0] < first:  # left the window
            probes.popleft()
        return probes

    def probe_count(self, ranks: Iterable[int]) -> int:
        """Probe lines in the ranks' windows: what the console hides."""
        return sum(len(self.probe_nos(r)) for r in ranks)

    def drop_probes(self, lines: list[LogLine]) -> list[LogLine]:
        """A batch of one rank's newest lines (already in the store) without its probe lines;
        the batch itself when it has none (the usual case: no copy)."""
        if not lines:
            return lines
        if len(lines) > self.window:  # partly left the window already: check each line
            return [line for line in lines if not is_probe_line(line[TEXT])]
        probes = self.probe_nos(lines[0][RANK])
        first = lines[0][NO]
        if not probes or probes[-1] < first:
            return lines
        hidden = set()
        for no in reversed(probes):
            if no < first:
                break
            hidden.add(no)
        return [line for line in lines if line[NO] not in hidden]

    def _without_probes(self, rank: int) -> Iterable[LogLine]:
        probes = self.probe_nos(rank)
        window = self.lines(rank)
        if not probes:
            return window
        hidden = set(probes)
        return [line for line in window if line[NO] not in hidden]

    def find(self, rank: int, no: int) -> LogLine | None:
        window = self._lines.get(rank)
        if not window or not window[0][NO] <= no <= window[-1][NO]:
            return None
        line = window[no - window[0][NO]]  # line numbers are contiguous within a window
        return line if line[NO] == no else next((ln for ln in window if ln[NO] == no), None)


def read_tail(run: Run, rank: int, window: int) -> list[LogLine]:
    """The newest ``window`` lines of a rank's file (runs in a thread)."""
    tail: deque[LogLine] = deque(maxlen=window)
    tail.extend(line_of(rank, no, ts, text) for no, ts, text in run.log(rank).read())
    return list(tail)


def read_lines(run: Run, rank: int, start: int = 1, stop: int | None = None) -> Iterator[LogLine]:
    for no, ts, text in run.log(rank).read(start):
        if stop is not None and no > stop:
            return
        yield line_of(rank, no, ts, text)


def lines_since_restart(run: Run, rank: int) -> list[tuple[int, str]]:
    """A rank's ``(line_no, text)`` since its last restart: what its boot checks are about."""
    return run.log(rank).since_restart()[1]


class ScanResult(NamedTuple):
    lines: list[LogLine]  # the newest ``cap`` matching lines, in capture order
    total: int  # every matching line
    scanned: dict[int, int]  # per rank, the last line number read


def scan_run(run: Run, ranks: list[int], line_filter: LineFilter, cap: int) -> ScanResult:
    """Every captured line of ``ranks`` through the filter (runs in a thread)."""
    per_rank: list[deque[LogLine]] = []
    count = 0
    scanned: dict[int, int] = {}
    for rank in ranks:
        kept: deque[LogLine] = deque(maxlen=cap)
        last = 0
        for no, ts, text in run.log(rank).read():
            last = no
            if line_filter.matches(text):
                count += 1
                kept.append(line_of(rank, no, ts, text))
        scanned[rank] = last
        per_rank.append(kept)
    merged = merge(per_rank)
    return ScanResult(merged[-cap:], count, scanned)
