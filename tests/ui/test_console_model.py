"""The console model without an app (the log panel's ``LogModel``), the messages that merge
(``can_replace``) and the rank-state colours, one per state."""

from __future__ import annotations

from typing import get_args

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widget import Widget

from sparktui.backend.events import NodeTelemetry, Notice, StagingProgress
from sparktui.core.linefilter import LineFilter
from sparktui.core.ranks import RankSnapshot, RankState
from sparktui.ui.formatting import STATE_COLOR, state_classes, state_css
from sparktui.ui.logmodel import LogModel
from sparktui.ui.logstore import LogStore
from sparktui.ui.messages import BackendEvent, supersedes
from sparktui.ui.widgets.rank_table import RankTable

PROBE = 'INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 200 OK'


def lines(no: int, texts: list[str]) -> list[tuple[int, str, str]]:
    return [(no + i, f"2026-01-01T00:00:00.{no + i:06d}Z", text) for i, text in enumerate(texts)]


def test_a_change_tells_the_observers_once_and_the_bar_is_one_value() -> None:
    store = LogStore(2, window=100)
    model = LogModel(store)
    seen: list[object] = []
    model.observe(lambda: seen.append(model.bar_state()))
    model.set(idle_text="Not running", shown=1, wrap=True)
    assert len(seen) == 1
    bar = model.bar_state()
    assert (bar.world, bar.shown, bar.wrap, bar.grep) == (2, 1, True, "")
    assert model.ranks() == [1] and model.placeholder() == "Not running"
    model.set(pending_filter=LineFilter.parse("(unclosed"))
    assert model.bar_state().grep_error is not None and len(seen) == 2
    try:
        model.set(nonsense=1)
    except AttributeError:
        pass
    else:
        raise AssertionError("an unknown field was accepted")


def test_the_model_picks_what_the_view_takes_and_counts_hidden_probes() -> None:
    store = LogStore(2, window=100)
    model = LogModel(store)
    added = store.add(0, lines(1, ["boot", PROBE, "ready"]))
    assert [line[3] for line in model.incoming(added) or []] == ["boot", "ready"]
    assert model.bar_state().hidden == 1
    assert model.incoming(store.add(1, lines(1, [PROBE]))) == []  # nothing to paint
    model.set(shown=0)
    assert model.incoming(store.add(1, lines(2, ["other rank"]))) is None
    model.set(line_filter=LineFilter.parse("ready"), matches=0)
    assert [line[3] for line in model.kept(store.add(0, lines(4, ["ready again", "x"])))] == ["ready again"]
    assert model.matches == 1 and model.bar_state().hidden == 0  # a grep searches probes too
    shown, scan = model.window_lines([0])
    assert [line[3] for line in shown] == ["ready", "ready again"] and not scan  # all in memory


def test_the_views_hold_one_window_of_matches_beyond_the_store_in_the_grid_too() -> None:
    model = LogModel(LogStore(32, window=10_000))
    ranks = model.ranks()
    assert model.cap(ranks) == 320_000  # every window, merged: the store's own lines
    model.grid = True
    assert model.cap(ranks) == 10_000  # a pane: its rank's window
    model.line_filter = LineFilter.parse("x")
    assert model.cap(ranks) == 312  # side by side under grep the panes share one window
    model.grid = False
    assert model.cap(ranks) == 10_000  # the one view under grep: one window of matches


def test_a_newer_sample_of_the_same_node_replaces_a_queued_one() -> None:
    t = [NodeTelemetry("n1", "ok", age_s=i) for i in range(3)]
    assert supersedes(t[1], t[0]) and BackendEvent(t[0]).can_replace(BackendEvent(t[1]))
    assert not supersedes(NodeTelemetry("n2", "ok"), t[0])
    assert not supersedes(StagingProgress("n1", "a", "pack"), StagingProgress("n1", "b", "pack"))
    assert supersedes(StagingProgress("n1", "a", "done"), StagingProgress("n1", "a", "pack"))
    assert not supersedes(Notice("info", "one"), Notice("info", "two"))  # every notice counts


class Counting(Widget):
    def __init__(self) -> None:
        super().__init__()
        self.handled: list[tuple[str, float]] = []

    def on_backend_event(self, message: BackendEvent) -> None:
        assert isinstance(message.event, NodeTelemetry)
        self.handled.append((message.event.node, message.event.age_s))


class OneWidget(App[None]):
    def compose(self) -> ComposeResult:
        yield Counting()


async def test_a_busy_screen_handles_the_latest_sample_of_each_node() -> None:
    app = OneWidget()
    async with app.run_test() as pilot:
        widget = app.query_one(Counting)
        for age in range(3):  # queued while the widget is not handling messages
            widget.post_message(BackendEvent(NodeTelemetry("n1", "ok", age_s=age)))
        widget.post_message(BackendEvent(NodeTelemetry("n2", "ok", age_s=9)))
        await pilot.pause()
        assert widget.handled == [("n1", 2), ("n2", 9)]


def test_every_rank_state_has_its_colour_and_component_class() -> None:
    states = set(get_args(RankState))
    assert set(STATE_COLOR) == states
    assert {f"rank-table--{s}" for s in states} <= RankTable.COMPONENT_CLASSES == state_classes("rank-table")
    assert all(f".rank-table--{s} " in state_css("rank-table") for s in states)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RankTable(lambda: 100.0)


async def test_the_rank_table_paints_the_snapshots_it_is_handed_and_restyles_on_a_theme_change() -> None:
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(RankTable)
        table.nodes = ("a", "b")
        table.snapshots = (RankSnapshot(0, "a", "ready", health=200, started=40.0, restarts=2), None)
        table.checks = ({"passed": 3}, {})
        await pilot.pause()
        row = table.values[0]
        assert [str(row[c]) for c in ("state", "health", "restarts", "up", "checks")] == \
            ["ready", "200", "2", "1m00s", "3/3 ✓"]
        assert str(table.values[1]["state"]) == "-" and table.states == {0: "ready"}
        before = table.values[0]["state"]
        assert isinstance(before, Text) and before.style
        app.theme = "nord"  # another success colour: the cell is drawn again in it
        await pilot.pause()
        after = table.values[0]["state"]
        assert isinstance(after, Text) and after.style != before.style
        assert table.get_cell("0", "state") is after
