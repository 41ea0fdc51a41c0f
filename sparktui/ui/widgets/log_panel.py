"""The logs: the bar, the grep input and the view, over the console's ``LogModel`` (which ranks,
the filter, the scan and the probes' state; the lines are its ``LogStore``'s).

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
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Input

from sparktui.backend.history import GrepProgress
from sparktui.core.controls import visible
from sparktui.core.linefilter import NO_FILTER, LineFilter
from sparktui.core.rungrep import ScanResult
from sparktui.core.runstore import Run
from sparktui.ui.logmodel import LogModel
from sparktui.ui.logstore import NO, RANK, TEXT, LogLine, LogStore, is_probe_line, merge, read_lines
from sparktui.ui.widgets.grep_input import GrepInput
from sparktui.ui.widgets.log_bar import LogBar
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
    """Observes its ``model``: a change repaints the bar (one ``LogBarState``, set only when it
    differs) and the views' placeholder. New lines reach the view in batches (``FLUSH_S``)."""

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
        self.model = LogModel(store)
        self.model.observe(self._model_changed)
        self.grep: RunGrep | None = None  # the session's Orchestrator
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
        return self.panes.views if self.model.grid else [self.view]

    def focus_view(self, rank: int | None = None) -> None:
        """Focus the one view, or side by side ``rank``'s pane (else the first)."""
        views = self.views()
        pane = self.panes.view(rank) if self.model.grid and rank is not None else None
        (pane or (views[0] if views else self.view)).focus()

    @property
    def grep_input(self) -> GrepInput:
        return self.query_one(GrepInput)

    def on_mount(self) -> None:
        self._model_changed()

    def _model_changed(self) -> None:
        try:
            bar = self.query_one(LogBar)
        except NoMatches:  # not composed yet: on_mount paints
            return
        bar.state = self.model.bar_state()
        placeholder = self.model.placeholder()
        for view in self.views() or [self.view]:
            view.set_placeholder(placeholder)

    def _shown_changed(self, **changes: object) -> None:
        """The views were filled or took lines: the model counts them, with ``changes``."""
        views = self.views() or [self.view]
        self.model.set(lines=sum(len(v.lines) for v in views), follow=all(v.follow for v in views),
                       **changes)

    # -- what is shown --------------------------------------------------------------------------
    def reset(self, run: Run | None) -> None:
        """A new session or a new run: start over from the store."""
        m = self.model
        m.run = run
        if m.shown is not None and m.shown >= self.store.world:
            m.shown = None
        if m.grid and len(self.panes.nodes) != self.store.world:
            self._set_grid(False)  # another recipe: its ranks get panes when g asks again
        self.rebuild()

    def show_ranks(self, rank: int | None) -> None:
        """All ranks merged (None) or one rank, in the one view."""
        self.model.shown = rank
        self._set_grid(False)
        self.rebuild()

    async def toggle_grid(self, nodes: list[str], rank: int | None = None) -> None:
        """A pane per rank (``nodes[rank]`` names its node), or back to the one view; the grid
        opens at ``rank``'s pane (the selected rank: its tab in front beyond the grid)."""
        if not self.model.grid:
            if not nodes:
                return
            await self.panes.setup(nodes)
            self.model.shown = None
        self._set_grid(not self.model.grid)
        self.rebuild()
        if self.model.grid and rank is not None:
            self.panes.show(rank)
        self.focus_view(rank)

    def _set_grid(self, grid: bool) -> None:
        self.model.grid = grid
        self.set_class(grid, "-grid")

    def _show(self, lines: list[LogLine], f: LineFilter, keep: LogLine | None = None) -> None:
        """Fill the view(s) with ``lines`` (capture order) and highlight what ``f`` matches."""
        if not self.model.grid:
            self.view.set_filter(f)
            self.view.set_lines(lines, keep=keep)
            return
        by_rank = _by_rank(lines)
        for rank, view in enumerate(self.panes.views):
            view.set_filter(f)
            view.set_lines(by_rank.get(rank, []))

    def rebuild(self, keep: LogLine | None = None) -> None:
        """Lay the shown lines out again from the store (and the files, when grep needs them)."""
        m = self.model
        m.excerpt = None
        self._generation += 1
        self._drop_pending()
        views = self.views()
        if not m.grid:
            self.view.set_options(prefix=m.shown is None)
        ranks = m.ranks()
        if not ranks:
            for view in views:
                view.clear()
            self._shown_changed(matches=None)
            return
        f = m.line_filter
        for view in views:
            view.max_lines = m.cap(ranks)
        lines, scan = m.window_lines(ranks)
        scanning = scan and self.grep is not None
        self._show(lines, f, keep)
        if not f.active:
            self._shown_changed(matches=None, scanning=False)
            return
        if scanning:
            self._shown_changed(matches=len(lines), scanning=True, scanned=0.0, counted=False)
            self._scan(ranks, f, self._generation)
        else:
            self._shown_changed(matches=len(lines), scanning=False)

    @work(exclusive=True, group="grep")
    async def _scan(self, ranks: list[int], f: LineFilter, generation: int) -> None:
        """The rest from the run's files; the count on the bar grows as the scan goes. A new
        pattern starts a new worker, which cancels this one: its scan stops at its next block."""
        m = self.model
        grep, run = self.grep, m.run
        if grep is None or run is None:
            return
        cap = m.cap(ranks) * (len(ranks) if m.grid else 1)
        shown = m.matches or 0
        try:
            async with contextlib.aclosing(grep.grep_history(f, ranks, cap=cap, run=run)) as scan:
                async for progress in scan:
                    if generation != self._generation:
                        return
                    if progress.result is None:  # the bar says the whole count once it is known
                        m.set(matches=max(shown, progress.count), scanned=progress.fraction,
                              counted=progress.counted)
                        continue
                    self._scanned(progress.result, ranks, f, cap)
        except Exception as exc:  # the windows' matches stay; say why the rest did not come
            if generation == self._generation and self.is_mounted:
                m.set(scanning=False)
                with contextlib.suppress(Exception):  # the app may be closing
                    self.app.notify(f"grep over the run's files failed: {visible(exc)}",  # quotes paths
                                    severity="error", markup=False)

    def _scanned(self, result: ScanResult, ranks: list[int], f: LineFilter, cap: int) -> None:
        """The scan's lines, and the store's that arrived since it read each rank's file."""
        lines, total = self.model.scan_lines(result, ranks)
        self.model.scanning = False
        views = self.views()
        keep = None if all(v.follow for v in views) else views[0].middle_line()
        self._show(lines[-cap:], f, keep)
        self._shown_changed(matches=total)

    def lines_added(self, lines: list[LogLine]) -> None:
        """A batch of one rank's new lines (already in the store)."""
        shown = self.model.incoming(lines)
        if shown is None:
            return
        if not shown:  # nothing to paint; the bar's count of hidden probes changed
            self.model.set()
            return
        self._pending.append(shown)
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
        if self.model.grid:  # each batch is one rank's, in order: to its pane, not merged
            panes = self.panes  # a query: once, not for each of 32 ranks' batches
            for batch in batches:
                pane = panes.view(batch[0][RANK])
                kept = self.model.kept(batch)
                if pane is not None and kept:
                    pane.append(kept)
        else:
            self.view.append(self.model.kept(batches[0] if len(batches) == 1 else merge(batches)))
        self._shown_changed()

    def _drop_pending(self) -> None:
        """The view is about to be filled from the store, which holds these lines too."""
        self._pending.clear()
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None

    @on(LogView.FollowChanged)
    def _follow_changed(self, event: LogView.FollowChanged) -> None:
        event.stop()
        if event.follow and self.model.excerpt is not None:
            self.rebuild()  # the end of an excerpt is not the live end: back to the live log
        else:
            self._shown_changed()

    # -- grep -----------------------------------------------------------------------------------
    def open_grep(self) -> None:
        self.add_class("-grep")
        self.grep_input.focus()
        if self.grep is not None and self.model.run is not None:
            self.grep.warm_grep(self.model.ranks(), self.model.run)

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
        pending = LineFilter.parse(event.value)
        self.grep_input.set_class(pending.error is not None, "-error")
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(GREP_DEBOUNCE_S, self._apply_pending)
        self.model.set(pending_filter=pending)

    def _apply_pending(self) -> None:
        self._debounce = None
        pending = self.model.pending_filter
        if pending.error is None and pending != self.model.line_filter:
            self._apply_filter(pending)

    def _apply_filter(self, f: LineFilter) -> None:
        self.model.pending_filter = f
        self.model.line_filter = f
        self.rebuild()

    @on(Input.Submitted, "#grep")
    def _grep_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._apply_pending()
        if not self.model.line_filter.text:
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

    def step(self, forward: bool, rank: int | None = None) -> None:
        """The next (previous) match in the one view, or side by side in the focused pane (else
        ``rank``'s); a toast when there is none (or no grep)."""
        if not self.model.line_filter.active:
            self.app.notify("Grep first: press / and type a regex", severity="information", timeout=3,
                            markup=False)
            return
        view = self.view
        if self.model.grid:
            focused = next((v for v in self.panes.views if v.has_focus), None)
            view = focused or (self.panes.view(rank) if rank is not None else None) or view
        if not view.step(forward):
            self.app.notify("No more matches " + ("below" if forward else "above"), timeout=2,
                            markup=False)
        self._shown_changed()  # the cursor on a line stops following

    def escape(self) -> None:
        """Esc: clear the grep, else leave an excerpt for the live log, else follow again."""
        m = self.model
        if m.pending_filter.text or m.line_filter.text:
            self.clear_grep()
        elif m.excerpt is not None:
            self.toggle_follow()  # leaves the excerpt for the live log
        elif not all(view.follow for view in self.views()):
            self.follow_all()

    # -- switches -------------------------------------------------------------------------------
    def toggle_follow(self) -> None:
        if self.model.excerpt is not None:
            self.view.follow = True
            self.rebuild()
            return
        follow = not all(v.follow for v in self.views())
        for view in self.views():
            view.set_follow(follow)
        self._shown_changed()

    def follow_all(self) -> None:
        for view in self.views():
            view.set_follow(True)
        self._shown_changed()

    def toggle_wrap(self) -> None:
        self._toggle("wrap")

    def toggle_timestamps(self) -> None:
        self._toggle("timestamps")

    def toggle_probes(self) -> None:
        """Hide or show the engine's access-log lines of sparktui's own health probes."""
        self.model.hide_probes = not self.model.hide_probes
        self.rebuild(keep=None if self.view.follow else self.view.middle_line())

    def _toggle(self, option: str) -> None:
        """Flip a view option on the one view and every pane alike (switching layout keeps it)."""
        shown = self.views()
        value = not getattr(shown[0], option) if shown else True
        for view in {self.view, *self.panes.views}:
            view.set_options(**{option: value})
        self.model.set(**{option: value})

    # -- jumps ----------------------------------------------------------------------------------
    def jump_to(self, rank: int, no: int) -> bool:
        """Show line ``no`` of ``rank`` in context, marked; False when neither the window nor the
        run's file has it."""
        m = self.model
        line = self.store.find(rank, no)
        if line is None:
            self._excerpt(rank, no)
            return m.run is not None
        if m.line_filter.active:
            self.grep_input.value = ""
            self.close_grep()
            m.line_filter = m.pending_filter = NO_FILTER
        if m.hide_probes and is_probe_line(line[TEXT]):
            m.hide_probes = False  # the line asked for is a probe's: show them (h hides again)
        if m.shown is not None and m.shown != rank:
            m.shown = rank
        self._set_grid(False)  # the one view, where the line sits among every rank's
        self.view.follow = False
        self.rebuild()
        try:
            index = self.view.lines.index(line)
        except ValueError:
            return False
        self.view.show_line(index)
        self._shown_changed()
        return True

    @work(exclusive=True, group="excerpt")
    async def _excerpt(self, rank: int, no: int) -> None:
        run = self.model.run
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
        self._shown_changed(excerpt=f"r{rank} lines {lines[0][NO]}-{lines[-1][NO]} from the run's "
                                    "file (f returns to live)")
