"""The log lines the console keeps in memory: a bounded window per rank.

The run's files (``r<rank>.log``) keep every line; the window keeps the newest ``window`` lines
of each rank for display. A grep over lines that left the window scans the files, in a thread,
through the Orchestrator (``grep_history``).

The store also knows which lines of each window are the engine's access-log lines of sparktui's
own health probes (``is_probe_line``), so the console can hide them and say how many it hid.
Each line is checked once, the first time anyone asks about its rank.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Final

from sparktui.core.engines import PROBE_HINT as _PROBE_HINT
from sparktui.core.engines import is_probe_line as is_probe_line  # the engines' access-log rule
from sparktui.core.rungrep import LogLine as LogLine  # re-exported: the console's line
from sparktui.core.rungrep import norm_ts as norm_ts
from sparktui.core.rungrep import tail
from sparktui.core.runstore import Run

# A line is a ``LogLine`` (``core.rungrep``): ``(ts, rank, no, text)``, a plain tuple (see
# there why), read with these indexes: ``line[TEXT]``.
TS: Final = 0
RANK: Final = 1
NO: Final = 2
TEXT: Final = 3


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
    return tail(run.log(rank).path, rank, window)


def read_lines(run: Run, rank: int, start: int = 1, stop: int | None = None) -> Iterator[LogLine]:
    for no, ts, text in run.log(rank).read(start):
        if stop is not None and no > stop:
            return
        yield line_of(rank, no, ts, text)
