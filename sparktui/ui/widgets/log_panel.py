"""The logs: the bar, the grep input and the view, over the console's ``LogStore``.

Which ranks are shown, the live grep (over every captured line of the shown ranks: the
in-memory window when it still holds everything, else the run's files, scanned in a thread),
follow / wrap / timestamps, next/previous match and jumps to a given line.
"""

from __future__ import annotations

import asyncio
import time

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Input

from sparktui.core.runstore import Run
from sparktui.ui.grep import NO_FILTER, LineFilter
from sparktui.ui.logstore import NO, RANK, TEXT, LogLine, LogStore, merge, read_lines, scan_run
from sparktui.ui.widgets.grep_input import GrepInput
from sparktui.ui.widgets.log_bar import LogBar, LogBarState
from sparktui.ui.widgets.log_view import LogView

GREP_DEBOUNCE_S = 0.12
# New lines reach the view at most this often: a quiet log at once, a flood in one batch per
# interval. Every batch re-lays out and repaints the view; under 4 ranks x 2,000 lines/s that
# was 40 frames' worth of work a second, and the keys waited behind it (docs/benchmarks.md).
FLUSH_S = 0.1
EXCERPT_CONTEXT = 300  # lines read from the file on each side of a line that left the window


class LogPanel(Vertical):
    DEFAULT_CSS = """
    LogPanel {
        height: 1fr;
        & GrepInput { display: none; }
        &.-grep GrepInput { display: block; }
    }
    """

    def __init__(self, store: LogStore, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = store
        self.run: Run | None = None
        self.shown: int | None = None
        self.line_filter: LineFilter = NO_FILTER
        self.pending_filter: LineFilter = NO_FILTER
        self.matches: int | None = None
        self.scanning = False
        self.excerpt: str | None = None
        self.idle_text = ""  # what an empty log says (set by the screen: not running, ...)
        self._generation = 0
        self._debounce: Timer | None = None
        self._pending: list[list[LogLine]] = []  # batches not in the view yet (all in the store)
        self._flush_timer: Timer | None = None
        self._flushed_at = 0.0

    def compose(self) -> ComposeResult:
        yield LogBar(id="log-bar")
        yield GrepInput(id="grep")
        yield LogView(id="log-view")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

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
        self.rebuild()

    def show_ranks(self, rank: int | None) -> None:
        self.shown = rank
        self.rebuild()

    def rebuild(self, keep: LogLine | None = None) -> None:
        """Lay the shown lines out again from the store (and the files, when grep needs them)."""
        self.excerpt = None
        self._generation += 1
        self._drop_pending()
        view = self.view
        view.set_options(prefix=self.shown is None)
        ranks = self.ranks()
        if not ranks:
            view.clear()
            self.matches = None
            self.update_bar()
            return
        f = self.line_filter
        # What the view may hold: the shown ranks' windows (the same line objects as the store:
        # no memory of its own), or under grep the newest `window` matches (lines that left the
        # windows are held by the view alone, so they are bounded like one more window).
        view.max_lines = max(1, self.store.window * (1 if f.active else len(ranks)))
        if not f.active:
            self.matches = None
            self.scanning = False
            view.set_filter(f)
            view.set_lines(self.store.view(ranks), keep=keep)
        elif self.run is None or all(self.store.complete(r) for r in ranks):
            lines = [line for line in self.store.view(ranks) if f.matches(line[TEXT])]
            self.matches = len(lines)
            self.scanning = False
            view.set_filter(f)
            view.set_lines(lines, keep=keep)
        else:
            self.scanning = True
            self._scan(self.run, ranks, f, self._generation)
        self.update_bar()

    @work(exclusive=True, group="grep")
    async def _scan(self, run: Run, ranks: list[int], f: LineFilter, generation: int) -> None:
        result = await asyncio.to_thread(scan_run, run, ranks, f, self.view.max_lines)
        if generation != self._generation:
            return
        newer = [line for r in ranks for line in self.store.lines(r)
                 if line[NO] > result.scanned.get(r, 0) and f.matches(line[TEXT])]
        lines = merge([result.lines, sorted(newer)])
        self.scanning = False
        self.matches = result.total + len(newer)
        self.view.set_filter(f)
        self.view.set_lines(lines)
        self.update_bar()

    def lines_added(self, lines: list[LogLine]) -> None:
        """A batch of one rank's new lines (already in the store)."""
        if self.excerpt is not None or self.scanning or not lines:
            return
        if self.shown is not None and lines[0][RANK] != self.shown:
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
        view = self.view
        excerpt = self.excerpt
        if self.line_filter.active and self.store.total(self.ranks()):
            view.set_placeholder("scanning…" if self.scanning else "no line matches")
        else:
            view.set_placeholder(self.idle_text)
        self.query_one(LogBar).show(LogBarState(
            world=self.store.world, shown=self.shown, follow=view.follow, wrap=view.wrap,
            timestamps=view.timestamps, grep=self.pending_filter.text,
            grep_error=self.pending_filter.error, matches=self.matches,
            scanning=self.scanning, lines=len(view.lines), note=excerpt))

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

    def clear_grep(self) -> None:
        self.grep_input.value = ""
        self.remove_class("-grep")
        self._apply_filter(NO_FILTER)
        self.view.focus()

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
            self.remove_class("-grep")
        self.view.focus()

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

    def step_match(self, forward: bool) -> bool:
        return self.view.step(forward)

    # -- switches -------------------------------------------------------------------------------
    def toggle_follow(self) -> None:
        if self.excerpt is not None:
            self.view.follow = True
            self.rebuild()
            return
        self.view.set_follow(not self.view.follow)
        self.update_bar()

    def toggle_wrap(self) -> None:
        self.view.set_options(wrap=not self.view.wrap)
        self.update_bar()

    def toggle_timestamps(self) -> None:
        self.view.set_options(timestamps=not self.view.timestamps)
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
            self.remove_class("-grep")
            self.line_filter = self.pending_filter = NO_FILTER
        if self.shown is not None and self.shown != rank:
            self.shown = rank
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
        view = self.view
        view.follow = False
        view.set_options(prefix=True)
        view.set_filter(NO_FILTER)
        view.set_lines(lines)
        view.show_line(target)
        self.excerpt = (f"r{rank} lines {lines[0][NO]}-{lines[-1][NO]} from the run's file "
                        "(f returns to live)")
        self.update_bar()
