"""The logs: the bar, the grep input and the view, over the console's ``LogStore``.

Which ranks are shown, the live grep (over every captured line of the shown ranks: the
in-memory window when it still holds everything; else the windows' matches at once, then the
run's files scanned in a thread through the Orchestrator, a live count on the bar until the
whole run is in), follow / wrap / timestamps, next/previous match and jumps to a given line. ``g`` lays the
ranks out side by side instead (``RankPanes``: a pane per rank); grep, follow, wrap and
timestamps then act on every pane.

The engine's access-log lines of sparktui's own health probes are hidden unless the operator
shows them (``hide_probes``); the bar counts them. A grep searches every line, probes included.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Protocol

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Input

from sparktui.backend.history import GrepProgress
from sparktui.core.controls import visible
from sparktui.core.linefilter import NO_FILTER, LineFilter
from sparktui.core.rungrep import ScanResult
from sparktui.core.runstore import Run
from sparktui.ui.logstore import (
    NO,
    RANK,
    TEXT,
    LogLine,
    LogStore,
    is_probe_line,
    merge,
    read_lines,
)
from sparktui.ui.widgets.grep_input import GrepInput
from sparktui.ui.widgets.log_bar import LogBar, LogBarState
from sparktui.ui.widgets.log_view import LogView
from sparktui.ui.widgets.rank_panes import RankPanes

GREP_DEBOUNCE_S = 0.12
# New lines reach the view at most this often: a quiet log at once, a flood in one batch per
# interval. Every batch re-lays out and repaints the view; under 4 ranks x 2,000 lines/s that
# was 40 frames' worth of work a second, and the keys waited behind it (docs/benchmarks.md).
FLUSH_S = 0.1
EXCERPT_CONTEXT = 300  # lines read from the file on each side of a line that left the window


class RunGrep(Protocol):
    """What of the session's Orchestrator the grep uses: ``grep_history`` over the run's files
    (progress then the result), and ``warm_grep``/``cool_grep``, the scanner processes started
    while the operator types the pattern and ended when the grep input closes."""

    def grep_history(self, line_filter: LineFilter, ranks: list[int], *, cap: int,
                     run: Run | None = None) -> AsyncGenerator[GrepProgress, None]: ...

    def warm_grep(self, ranks: list[int], run: Run | None = None) -> None: ...

    def cool_grep(self) -> None: ...


def _by_rank(lines: list[LogLine]) -> dict[int, list[LogLine]]:
    """Each rank's lines, in the order given."""
    out: dict[int, list[LogLine]] = {}
    for line in lines:
        out.setdefault(line[RANK], []).append(line)
    return out


class LogPanel(Vertical):
    DEFAULT_CSS = """
    LogPanel {
        height: 1fr;
        & GrepInput { display: none; }
        &.-grep GrepInput { display: block; }
        & RankPanes { display: none; }
        &.-grid RankPanes { display: block; }
        &.-grid #log-view { display: none; }
    }
    """

    def __init__(self, store: LogStore, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = store
        self.run: Run | None = None
        self.grep: RunGrep | None = None  # the session's Orchestrator
        self.shown: int | None = None
        self.grid = False  # a pane per rank instead of one view
        self.line_filter: LineFilter = NO_FILTER
        self.pending_filter: LineFilter = NO_FILTER
        self.matches: int | None = None  # kept lines; while scanning, those found so far
        self.scanning = False  # the view waits for the scan's lines (live lines held back)
        self.counted = False  # while scanning: ``matches`` is already the whole run's count
        self.scanned: float = 0.0  # the share of the run's files read by the scan
        self.excerpt: str | None = None
        self.idle_text = ""  # what an empty log says (set by the screen: not running, ...)
        self.hide_probes = True  # hide the access-log lines of sparktui's own health probes
        self._generation = 0
        self._debounce: Timer | None = None
        self._pending: list[list[LogLine]] = []  # batches not in the view yet (all in the store)
        self._flush_timer: Timer | None = None
        self._flushed_at = 0.0

    def compose(self) -> ComposeResult:
        yield LogBar(id="log-bar")
        yield GrepInput(id="grep")
        yield LogView(id="log-view")
        yield RankPanes(id="rank-panes")

    @property
    def view(self) -> LogView:
        """The one view (all ranks merged, or one rank)."""
        return self.query_one("#log-view", LogView)

    @property
    def panes(self) -> RankPanes:
        return self.query_one(RankPanes)

    def views(self) -> list[LogView]:
        """What is on screen: the one view, or every rank's pane."""
        return self.panes.views if self.grid else [self.view]

    def focus_view(self, rank: int | None = None) -> None:
        """Focus the one view, or side by side ``rank``'s pane (else the first)."""
        views = self.views()
        pane = self.panes.view(rank) if self.grid and rank is not None else None
        (pane or (views[0] if views else self.view)).focus()

    @property
    def grep_input(self) -> GrepInput:
        return self.query_one(GrepInput)

    def on_mount(self) -> None:
        self.update_bar()

    # -- what is shown --------------------------------------------------------------------------
    def ranks(self) -> list[int]:
        if self.shown is None:
            return list(range(self.store.world))
        return [self.shown]

    def reset(self, run: Run | None) -> None:
        """A new session or a new run: start over from the store."""
        self.run = run
        if self.shown is not None and self.shown >= self.store.world:
            self.shown = None
        if self.grid and len(self.panes.nodes) != self.store.world:
            self._set_grid(False)  # another recipe: its ranks get panes when g asks again
        self.rebuild()

    def show_ranks(self, rank: int | None) -> None:
        """All ranks merged (None) or one rank, in the one view."""
        self.shown = rank
        self._set_grid(False)
        self.rebuild()

    async def toggle_grid(self, nodes: list[str]) -> None:
        """A pane per rank (``nodes[rank]`` names its node), or back to the one view."""
        if not self.grid:
            if not nodes:
                return
            await self.panes.setup(nodes)
            self.shown = None
        self._set_grid(not self.grid)
        self.rebuild()
        self.focus_view()

    def _set_grid(self, grid: bool) -> None:
        self.grid = grid
        self.set_class(grid, "-grid")

    def _cap(self, f: LineFilter, ranks: list[int]) -> int:
        """Lines a view may hold: the shown ranks' windows (the same line objects as the store:
        no memory of its own), or under grep the newest `window` matches (lines that left the
        windows are held by the view alone, so they are bounded like one more window)."""
        per_view = 1 if self.grid or f.active else len(ranks)
        return max(1, self.store.window * per_view)

    def _show(self, lines: list[LogLine], f: LineFilter, keep: LogLine | None = None) -> None:
        """Fill the view(s) with ``lines`` (capture order) and highlight what ``f`` matches."""
        if not self.grid:
            self.view.set_filter(f)
            self.view.set_lines(lines, keep=keep)
            return
        by_rank = _by_rank(lines)
        for rank, view in enumerate(self.panes.views):
            view.set_filter(f)
            view.set_lines(by_rank.get(rank, []))

    def rebuild(self, keep: LogLine | None = None) -> None:
        """Lay the shown lines out again from the store (and the files, when grep needs them)."""
        self.excerpt = None
        self._generation += 1
        self._drop_pending()
        views = self.views()
        if not self.grid:
            self.view.set_options(prefix=self.shown is None)
        ranks = self.ranks()
        if not ranks:
            for view in views:
                view.clear()
            self.matches = None
            self.update_bar()
            return
        f = self.line_filter
        for view in views:
            view.max_lines = self._cap(f, ranks)
        if not f.active:
            self.matches = None
            self.scanning = False
            self._show(self.store.view(ranks, hide_probes=self.hide_probes), f, keep)
        else:
            # the windows' matches at once: the first screen (the newest lines are in memory)
            lines = [line for line in self.store.view(ranks) if f.matches(line[TEXT])]
            self.matches = len(lines)
            complete = all(self.store.complete(r) for r in ranks)
            self.scanning = not complete and self.run is not None and self.grep is not None
            self._show(lines, f, keep)
            if self.scanning:
                self.scanned = 0.0
                self.counted = False
                self._scan(ranks, f, self._generation)
        self.update_bar()

    @work(exclusive=True, group="grep")
    async def _scan(self, ranks: list[int], f: LineFilter, generation: int) -> None:
        """The rest from the run's files; the count on the bar grows as the scan goes. A new
        pattern starts a new worker, which cancels this one: its scan stops at its next block."""
        grep, run = self.grep, self.run
        if grep is None or run is None:
            return
        cap = self._cap(f, ranks) * (len(ranks) if self.grid else 1)
        shown = self.matches or 0
        try:
            async with contextlib.aclosing(grep.grep_history(f, ranks, cap=cap, run=run)) as scan:
                async for progress in scan:
                    if generation != self._generation:
                        return
                    if progress.result is None:
                        self.matches, self.scanned = max(shown, progress.count), progress.fraction
                        self.counted = progress.counted  # the bar says the whole count at once
                        self.update_bar()
                        continue
                    self._scanned(progress.result, ranks, f, cap)
        except Exception as exc:  # the windows' matches stay; say why the rest did not come
            if generation == self._generation and self.is_mounted:
                self.scanning = False
                self.update_bar()
                with contextlib.suppress(Exception):  # the app may be closing
                    self.app.notify(f"grep over the run's files failed: {visible(exc)}",  # quotes paths
                                    severity="error", markup=False)

    def _scanned(self, result: ScanResult, ranks: list[int], f: LineFilter, cap: int) -> None:
        """The scan's lines, and the store's that arrived since it read each rank's file."""
        newer = [line for r in ranks for line in self.store.lines(r)
                 if line[NO] > result.scanned.get(r, 0) and f.matches(line[TEXT])]
        lines = merge([result.lines, sorted(newer)])
        self.scanning = False
        self.matches = result.total + len(newer)
        views = self.views()
        keep = None if all(v.follow for v in views) else views[0].middle_line()
        self._show(lines[-cap:], f, keep)
        self.update_bar()

    def lines_added(self, lines: list[LogLine]) -> None:
        """A batch of one rank's new lines (already in the store)."""
        if self.excerpt is not None or self.scanning or not lines:
            return
        if self.shown is not None and lines[0][RANK] != self.shown:
            return
        if self.hide_probes and not self.line_filter.active:
            lines = self.store.drop_probes(lines)
            if not lines:  # nothing to paint; the bar's count changed
                self.update_bar()
                return
        self._pending.append(lines)
        if self._flush_timer is None:
            wait = self._flushed_at + FLUSH_S - time.monotonic()
            if wait <= 0:
                self._flush()
            else:
                self._flush_timer = self.set_timer(wait, self._flush)

    def _flush(self) -> None:
        self._flush_timer = None
        self._flushed_at = time.monotonic()
        batches, self._pending = self._pending, []
        if not batches:
            return
        lines = batches[0] if len(batches) == 1 else merge(batches)
        f = self.line_filter
        if f.active:
            lines = [line for line in lines if f.matches(line[TEXT])]
            self.matches = (self.matches or 0) + len(lines)
        if self.grid:
            for rank, batch in _by_rank(lines).items():
                pane = self.panes.view(rank)
                if pane is not None:
                    pane.append(batch)
        else:
            self.view.append(lines)
        self.update_bar()

    def _drop_pending(self) -> None:
        """The view is about to be filled from the store, which holds these lines too."""
        self._pending.clear()
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None

    def set_idle_text(self, text: str) -> None:
        self.idle_text = text
        self.update_bar()

    def update_bar(self) -> None:
        views = self.views() or [self.view]
        view = views[0]
        excerpt = self.excerpt
        if self.line_filter.active and self.store.total(self.ranks()):
            placeholder = "scanning…" if self.scanning else "no line matches"
        else:
            placeholder = self.idle_text
        for each in views:
            each.set_placeholder(placeholder)
        hiding = self.hide_probes and not self.line_filter.active and excerpt is None
        self.query_one(LogBar).state = (LogBarState(
            world=self.store.world, shown=self.shown, follow=all(v.follow for v in views),
            wrap=view.wrap, timestamps=view.timestamps, grep=self.pending_filter.text,
            grep_error=self.pending_filter.error, matches=self.matches,
            scanning=self.scanning and not self.counted, scanned=self.scanned,
            lines=sum(len(v.lines) for v in views),
            note=excerpt,
            grid=self.grid, hide_probes=self.hide_probes,
            hidden=self.store.probe_count(self.ranks()) if hiding else 0))

    @on(LogView.FollowChanged)
    def _follow_changed(self, event: LogView.FollowChanged) -> None:
        event.stop()
        if event.follow and self.excerpt is not None:
            self.rebuild()  # the end of an excerpt is not the live end: back to the live log
        self.update_bar()

    # -- grep -----------------------------------------------------------------------------------
    def open_grep(self) -> None:
        self.add_class("-grep")
        self.grep_input.focus()
        if self.grep is not None and self.run is not None:
            self.grep.warm_grep(self.ranks(), self.run)

    def close_grep(self) -> None:
        self.remove_class("-grep")
        if self.grep is not None:
            self.grep.cool_grep()

    def clear_grep(self) -> None:
        self.grep_input.value = ""
        self.close_grep()
        self._apply_filter(NO_FILTER)
        self.focus_view()

    @on(Input.Changed, "#grep")
    def _grep_changed(self, event: Input.Changed) -> None:
        self.pending_filter = LineFilter.parse(event.value)
        self.grep_input.set_class(self.pending_filter.error is not None, "-error")
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(GREP_DEBOUNCE_S, self._apply_pending)
        self.update_bar()

    def _apply_pending(self) -> None:
        self._debounce = None
        if self.pending_filter.error is None and self.pending_filter != self.line_filter:
            self._apply_filter(self.pending_filter)

    def _apply_filter(self, f: LineFilter) -> None:
        self.pending_filter = f
        self.line_filter = f
        self.rebuild()

    @on(Input.Submitted, "#grep")
    def _grep_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._apply_pending()
        if not self.line_filter.text:
            self.close_grep()
        self.focus_view()

    @on(GrepInput.Cleared)
    def _grep_cleared(self, event: GrepInput.Cleared) -> None:
        event.stop()
        self.clear_grep()

    def apply_grep_now(self, text: str) -> None:
        """Set the pattern and filter at once (the command palette, tests)."""
        self.add_class("-grep")
        with self.grep_input.prevent(Input.Changed):
            self.grep_input.value = text
        self._apply_filter(LineFilter.parse(text))

    def step_match(self, forward: bool, rank: int | None = None) -> bool:
        """The next (previous) match in the one view, or side by side in the focused pane (else
        ``rank``'s)."""
        view = self.view
        if self.grid:
            focused = next((v for v in self.panes.views if v.has_focus), None)
            view = focused or (self.panes.view(rank) if rank is not None else None) or view
        return view.step(forward)

    # -- switches -------------------------------------------------------------------------------
    def toggle_follow(self) -> None:
        if self.excerpt is not None:
            self.view.follow = True
            self.rebuild()
            return
        follow = not all(v.follow for v in self.views())
        for view in self.views():
            view.set_follow(follow)
        self.update_bar()

    def follow_all(self) -> None:
        for view in self.views():
            view.set_follow(True)
        self.update_bar()

    def toggle_wrap(self) -> None:
        self._toggle("wrap")

    def toggle_timestamps(self) -> None:
        self._toggle("timestamps")

    def toggle_probes(self) -> None:
        """Hide or show the engine's access-log lines of sparktui's own health probes."""
        self.hide_probes = not self.hide_probes
        self.rebuild(keep=None if self.view.follow else self.view.middle_line())

    def _toggle(self, option: str) -> None:
        """Flip a view option on the one view and every pane alike (switching layout keeps it)."""
        shown = self.views()
        value = not getattr(shown[0], option) if shown else True
        for view in {self.view, *self.panes.views}:
            view.set_options(**{option: value})
        self.update_bar()

    # -- jumps ----------------------------------------------------------------------------------
    def jump_to(self, rank: int, no: int) -> bool:
        """Show line ``no`` of ``rank`` in context, marked; False when neither the window nor the
        run's file has it."""
        line = self.store.find(rank, no)
        if line is None:
            self._excerpt(rank, no)
            return self.run is not None
        if self.line_filter.active:
            self.grep_input.value = ""
            self.close_grep()
            self.line_filter = self.pending_filter = NO_FILTER
        if self.hide_probes and is_probe_line(line[TEXT]):
            self.hide_probes = False  # the line asked for is a probe's: show them (h hides again)
        if self.shown is not None and self.shown != rank:
            self.shown = rank
        self._set_grid(False)  # the one view, where the line sits among every rank's
        self.view.follow = False
        self.rebuild()
        try:
            index = self.view.lines.index(line)
        except ValueError:
            return False
        self.view.show_line(index)
        self.update_bar()
        return True

    @work(exclusive=True, group="excerpt")
    async def _excerpt(self, rank: int, no: int) -> None:
        run = self.run
        if run is None:
            return
        start = max(1, no - EXCERPT_CONTEXT)
        lines = await asyncio.to_thread(
            lambda: list(read_lines(run, rank, start, no + EXCERPT_CONTEXT)))
        target = next((i for i, line in enumerate(lines) if line[NO] == no), None)
        if target is None:
            return
        self._generation += 1
        self._drop_pending()
        self._set_grid(False)
        view = self.view
        view.follow = False
        view.set_options(prefix=True)
        view.set_filter(NO_FILTER)
        view.set_lines(lines)
        view.show_line(target)
        self.excerpt = (f"r{rank} lines {lines[0][NO]}-{lines[-1][NO]} from the run's file "
                        "(f returns to live)")
        self.update_bar()
