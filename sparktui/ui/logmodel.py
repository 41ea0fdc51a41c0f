"""What the log panel shows, kept without Textual: which ranks, the filter being typed and the
one applied, the grep's count and the scan of the run's files, an excerpt of a file, the health
probes' lines hidden or shown, the view switches, and the windows of lines (``LogStore``).

The panel changes it through ``set`` and observes it: each change calls the observers once,
which paint the bar (``bar_state``: one state object) and the views' placeholder. Tests drive
it with no app.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparktui.core.linefilter import NO_FILTER, LineFilter
from sparktui.core.rungrep import ScanResult
from sparktui.core.runstore import Run
from sparktui.ui.logstore import NO, RANK, TEXT, LogLine, LogStore, merge


@dataclass(frozen=True)
class LogBarState:
    """The line above the logs, as one value: the bar repaints when it changes."""

    world: int = 0
    shown: int | None = None  # None: all ranks
    follow: bool = True
    wrap: bool = False
    timestamps: bool = False
    grep: str = ""
    grep_error: str | None = None
    matches: int | None = None  # lines kept by the filter (while scanning: found so far)
    scanning: bool = False
    scanned: float = 0.0  # while scanning: the share of the run's files read
    lines: int = 0
    note: str | None = None  # e.g. showing an excerpt of a file
    grid: bool = False  # a pane per rank
    hide_probes: bool = True  # the engine's access-log lines of sparktui's probes are hidden
    hidden: int = 0  # probe lines hidden from what is shown


class LogModel:
    """The log panel's state; ``store`` holds the lines."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.run: Run | None = None
        self.shown: int | None = None  # one rank's lines, or (None) every rank's merged
        self.grid = False  # a pane per rank instead of one view
        self.line_filter: LineFilter = NO_FILTER  # applied
        self.pending_filter: LineFilter = NO_FILTER  # as typed (may not parse)
        self.matches: int | None = None  # kept lines; while scanning, those found so far
        self.scanning = False  # the view waits for the scan's lines (live lines held back)
        self.counted = False  # while scanning: ``matches`` is already the whole run's count
        self.scanned = 0.0  # the share of the run's files read by the scan
        self.excerpt: str | None = None  # what an excerpt of a file shows, while one does
        self.idle_text = ""  # what an empty log says (not running, ...)
        self.hide_probes = True  # hide the access-log lines of sparktui's own health probes
        self.follow = True  # every view follows the end
        self.wrap = False
        self.timestamps = False
        self.lines = 0  # lines in the view(s)
        self._observers: list[Callable[[], None]] = []

    def observe(self, observer: Callable[[], None]) -> None:
        self._observers.append(observer)

    def set(self, **changes: Any) -> None:
        """Change fields (by name) and tell the observers, once. With no field: the store took
        lines (the hidden probes' count may have changed)."""
        for name, value in changes.items():
            if not hasattr(self, name) or name.startswith("_") or name == "store":
                raise AttributeError(f"LogModel has no field {name!r}")
            setattr(self, name, value)
        for observer in self._observers:
            observer()

    # -- what is shown --------------------------------------------------------------------------
    def ranks(self) -> list[int]:
        if self.shown is None:
            return list(range(self.store.world))
        return [self.shown]

    def cap(self, ranks: list[int]) -> int:
        """Lines a view may hold: the shown ranks' windows (the same line objects as the store:
        no memory of its own), or under grep the newest `window` matches (lines that left the
        windows are held by the view alone, so they are bounded like one more window). Side by
        side under grep the panes share that one window: a window each held up to 32 more
        windows' worth of lines, and the console's memory grew for minutes after the ranks'
        windows had filled (docs/benchmarks.md, the console at 32 ranks)."""
        if self.grid and self.line_filter.active:
            return max(1, self.store.window // max(1, len(ranks)))
        per_view = 1 if self.grid or self.line_filter.active else len(ranks)
        return max(1, self.store.window * per_view)

    def window_lines(self, ranks: list[int]) -> tuple[list[LogLine], bool]:
        """The shown lines the windows hold (under grep: their matches, counted), and whether
        the run's files must be scanned for the rest (the windows lost lines)."""
        f = self.line_filter
        if not f.active:
            return self.store.view(ranks, hide_probes=self.hide_probes), False
        lines = [line for line in self.store.view(ranks) if f.matches(line[TEXT])]
        complete = all(self.store.complete(r) for r in ranks)
        return lines, not complete and self.run is not None

    def scan_lines(self, result: ScanResult, ranks: list[int]) -> tuple[list[LogLine], int]:
        """The scan's lines with the store's that arrived since it read each rank's file, and
        the whole count."""
        f = self.line_filter
        newer = [line for r in ranks for line in self.store.lines(r)
                 if line[NO] > result.scanned.get(r, 0) and f.matches(line[TEXT])]
        return merge([result.lines, sorted(newer)]), result.total + len(newer)

    def incoming(self, lines: list[LogLine]) -> list[LogLine] | None:
        """A batch of one rank's new lines (already in the store) as the view takes it: None
        when the view shows none of them (an excerpt, a scan under way, another rank); probe
        lines dropped while hidden."""
        if self.excerpt is not None or self.scanning or not lines:
            return None
        if self.shown is not None and lines[0][RANK] != self.shown:
            return None
        if self.hide_probes and not self.line_filter.active:
            return self.store.drop_probes(lines)
        return lines

    def kept(self, lines: list[LogLine]) -> list[LogLine]:
        """New lines as the filter keeps them (counted among the matches)."""
        f = self.line_filter
        if not f.active:
            return lines
        kept = [line for line in lines if f.matches(line[TEXT])]
        self.matches = (self.matches or 0) + len(kept)
        return kept

    # -- what the bar and an empty view say -----------------------------------------------------
    @property
    def hiding(self) -> bool:
        """Probe lines are left out of what is shown now."""
        return self.hide_probes and not self.line_filter.active and self.excerpt is None

    def placeholder(self) -> str:
        if self.line_filter.active and self.store.total(self.ranks()):
            return "scanning…" if self.scanning else "no line matches"
        return self.idle_text

    def bar_state(self) -> LogBarState:
        return LogBarState(
            world=self.store.world, shown=self.shown, follow=self.follow, wrap=self.wrap,
            timestamps=self.timestamps, grep=self.pending_filter.text,
            grep_error=self.pending_filter.error, matches=self.matches,
            scanning=self.scanning and not self.counted, scanned=self.scanned, lines=self.lines,
            note=self.excerpt, grid=self.grid, hide_probes=self.hide_probes,
            hidden=self.store.probe_count(self.ranks()) if self.hiding else 0)
