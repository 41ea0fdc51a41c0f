"""The log panel over a store: a quiet log at once, a flood in few batches, the grep bound."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from textual.app import App, ComposeResult
from textual.containers import Grid
from textual.pilot import Pilot
from textual.widgets import TabbedContent

from sparktui.ui.logstore import NO, RANK, LogStore
from sparktui.ui.widgets.log_panel import FLUSH_S, LogPanel
from sparktui.ui.widgets.log_view import LogView
from tests.ui.conftest import wait_for


class PanelApp(App[None]):
    def __init__(self, store: LogStore) -> None:
        super().__init__()
        self.store = store

    def compose(self) -> ComposeResult:
        yield LogPanel(self.store)


@asynccontextmanager
async def opened(world: int, window: int) -> AsyncIterator[tuple[Pilot[None], LogPanel, LogView]]:
    app = PanelApp(LogStore(world, window=window))
    async with app.run_test(size=(80, 20)) as pilot:
        yield pilot, app.query_one(LogPanel), app.query_one(LogView)


def feed(panel: LogPanel, rank: int, start: int, count: int, tick: int) -> None:
    """As the screen does with a LogLines message: into the store, then to the panel."""
    raw = [(no, f"2026-01-01T00:00:{tick % 60:02d}.{no:06d}Z", f"{'even' if no % 2 == 0 else 'odd'} {no}")
           for no in range(start, start + count)]
    panel.lines_added(panel.store.add(rank, raw))


async def test_a_quiet_line_shows_at_once_and_a_flood_in_few_batches() -> None:
    async with opened(2, 1_000) as (pilot, panel, view):
        appended: list[int] = []
        append = view.append
        view.append = lambda lines: (appended.append(len(lines)), append(lines))[1]  # type: ignore[method-assign]
        await pilot.pause(FLUSH_S * 2)
        feed(panel, 0, 1, 1, 0)
        assert [ln[NO] for ln in view.lines] == [1]  # nothing was shown lately: no wait
        next_no = {0: 2, 1: 1}
        for tick in range(1, 31):  # 30 batches in a burst, both ranks
            rank = tick % 2
            feed(panel, rank, next_no[rank], 10, tick)
            next_no[rank] += 10
        await pilot.pause(FLUSH_S * 3)
        assert 2 <= len(appended) <= 4, appended  # the burst came in one or two flushes
        assert len(view.lines) == panel.store.total([0, 1])
        assert sorted(view.lines) == view.lines  # capture order across the ranks
        assert len({(ln[RANK], ln[NO]) for ln in view.lines}) == len(view.lines)


async def test_a_rebuild_drops_what_was_waiting_without_losing_or_doubling_it() -> None:
    async with opened(1, 1_000) as (pilot, panel, view):
        feed(panel, 0, 1, 5, 0)
        feed(panel, 0, 6, 5, 1)  # within FLUSH_S: waits
        assert len(view.lines) == 5
        panel.apply_grep_now("odd")  # rebuilds from the store, which has all ten
        await pilot.pause(FLUSH_S * 2)
        assert [ln[NO] for ln in view.lines] == [1, 3, 5, 7, 9] and panel.model.matches == 5


async def test_grep_holds_the_newest_window_of_matches_and_counts_them_all() -> None:
    async with opened(2, 40) as (pilot, panel, view):
        panel.apply_grep_now("even")
        for tick in range(20):
            for rank in (0, 1):
                feed(panel, rank, 1 + tick * 10, 10, tick)
            await pilot.pause(FLUSH_S * 1.5)
        await pilot.pause(FLUSH_S * 2)
        assert panel.model.matches == 200  # every match of both ranks was counted
        assert len(view.lines) <= 40  # but only a window's worth is held
        assert view.lines[-1][NO] == 200 and all(ln[NO] % 2 == 0 for ln in view.lines)
        panel.clear_grep()
        assert len(view.lines) == 80  # all ranks, no grep: both windows


async def test_side_by_side_a_pane_per_rank_in_a_grid() -> None:
    async with opened(4, 1_000) as (pilot, panel, view):
        for rank in range(4):
            feed(panel, rank, 1, 6, rank)
        await panel.toggle_grid(["n0", "n1", "n2", "n3"])
        await pilot.pause()
        grid = panel.panes.query_one(Grid)
        assert (grid.styles.grid_size_columns, grid.styles.grid_size_rows) == (2, 2)
        assert not view.display and panel.model.grid
        panes = panel.panes.views
        assert [{ln[RANK] for ln in pane.lines} for pane in panes] == [{0}, {1}, {2}, {3}]
        assert all(len(pane.lines) == 6 and not pane.prefix for pane in panes)
        await pilot.pause(FLUSH_S * 2)
        feed(panel, 2, 7, 3, 9)  # live lines go to their rank's pane
        await pilot.pause(FLUSH_S * 2)
        assert [len(pane.lines) for pane in panes] == [6, 6, 9, 6]
        panel.apply_grep_now("even")  # every pane filtered, the count over all of them
        await pilot.pause()
        assert panel.model.matches == 3 + 3 + 4 + 3
        assert all(ln[NO] % 2 == 0 for pane in panes for ln in pane.lines)
        panel.toggle_wrap()
        assert all(pane.wrap for pane in panes)
        panel.show_ranks(1)  # one rank's log: back to the one view
        await pilot.pause()
        assert not panel.model.grid and view.display and {ln[RANK] for ln in view.lines} == {1}


async def test_side_by_side_beyond_eight_ranks_is_tabs() -> None:
    async with opened(10, 1_000) as (pilot, panel, _view):
        for rank in range(10):
            feed(panel, rank, 1, 2, rank)
        await panel.toggle_grid([f"n{r}" for r in range(10)])
        await pilot.pause()
        tabs = panel.panes.query_one(TabbedContent)
        assert tabs.tab_count == 10
        panel.panes.show(9)
        await pilot.pause()
        assert tabs.active == "rank-tab-9"
        assert [{ln[RANK] for ln in pane.lines} for pane in panel.panes.views] == [{r} for r in range(10)]
        await panel.toggle_grid([])  # g again: the merged view
        assert not panel.model.grid and len(panel.view.lines) == 20


async def test_side_by_side_opens_at_the_selected_rank_and_a_hidden_pane_catches_up() -> None:
    async with opened(32, 1_000) as (pilot, panel, _view):
        for rank in range(32):
            feed(panel, rank, 1, 2, rank)
        await panel.toggle_grid([f"n{r}" for r in range(32)], rank=20)  # rank 20 was selected
        tabs = panel.panes.query_one(TabbedContent)
        pane = panel.panes.view(20)
        assert pane is not None
        # waited for, not paused for: on a loaded machine a refresh or a flush comes later
        await wait_for(pilot, lambda: tabs.active == "rank-tab-20" and pane.has_focus, 10,
                       "rank 20's tab in front and focused")
        hidden = panel.panes.view(5)
        assert hidden is not None
        for tick in range(40, 60):  # a flood into a pane whose tab is not in front
            feed(panel, 5, 3 + (tick - 40) * 10, 10, tick)
        panel.toggle_wrap()
        await wait_for(pilot, lambda: len(hidden.lines) == 202, 10, "the flood in the hidden pane")
        assert hidden.wrap  # taken, and laid out later
        panel.panes.show(5)
        await wait_for(pilot, lambda: 0 < hidden.max_scroll_y == hidden.scroll_y, 10,
                       "the pane laid out when shown, at its end")
        assert "odd 201" in "".join(seg.text for strip in hidden.render_lines(hidden.size.region)
                                    for seg in strip)
