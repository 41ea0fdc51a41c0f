"""The access-log lines of sparktui's own health probes: hidden in the log view (h shows them),
counted in the bar, each line checked once; grep still finds them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from sparktui.ui.logstore import NO, TEXT, LogStore, is_probe_line
from sparktui.ui.widgets.log_bar import LogBar
from sparktui.ui.widgets.log_panel import FLUSH_S, LogPanel
from sparktui.ui.widgets.log_view import LogView

PROBE = '[2026-01-01 00:00:00 TP0] INFO:     127.0.0.1:54321 - "GET /health HTTP/1.1" 200 OK'
MODELS = 'INFO:     127.0.0.1:40000 - "GET /v1/models HTTP/1.1" 200 OK'


def test_probe_lines_as_uvicorn_sglang_and_vllm_print_them() -> None:
    assert is_probe_line(PROBE) and is_probe_line(MODELS)
    assert is_probe_line('(APIServer pid=1) INFO:     10.0.0.2:1 - "GET /health HTTP/1.1" 503 Service Unavailable')
    assert not is_probe_line('INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK')
    assert not is_probe_line('INFO:     127.0.0.1:1 - "GET /health_generate HTTP/1.1" 200 OK')
    assert not is_probe_line('INFO:     127.0.0.1:1 - "GET /metrics HTTP/1.1" 200 OK')
    assert not is_probe_line("the server checks /health on its own")


def lines(start: int, texts: list[str]) -> list[tuple[int, str, str]]:
    return [(no, f"2026-01-01T00:00:{no % 60:02d}.{no:06d}Z", text)
            for no, text in enumerate(texts, start)]


def test_the_store_counts_probe_lines_in_each_window() -> None:
    store = LogStore(2, window=5)
    store.add(0, lines(1, ["a", PROBE, "b", MODELS]))
    store.add(1, lines(1, [PROBE]))
    assert list(store.probe_nos(0)) == [2, 4] and store.probe_count([0, 1]) == 3
    assert [ln[TEXT] for ln in store.view([0], hide_probes=True)] == ["a", "b"]
    assert [ln[TEXT] for ln in store.view([0, 1], hide_probes=True)] == ["a", "b"]
    assert len(store.view([0, 1])) == 5  # the store keeps every line
    # lines 1-2 leave the window of 5: the probe on line 2 is no longer counted
    added = store.add(0, lines(5, ["c", PROBE, "d"]))
    assert [ln[NO] for ln in store.lines(0)] == [3, 4, 5, 6, 7]
    assert list(store.probe_nos(0)) == [4, 6]
    assert [ln[TEXT] for ln in store.drop_probes(added)] == ["c", "d"]
    quiet = store.add(0, lines(8, ["e"]))
    assert store.drop_probes(quiet) is quiet  # a batch without probes passes as it is
    store.reset(None, 2)
    assert store.probe_count([0, 1]) == 0


class PanelApp(App[None]):
    def __init__(self, store: LogStore) -> None:
        super().__init__()
        self.store = store

    def compose(self) -> ComposeResult:
        yield LogPanel(self.store)


@asynccontextmanager
async def opened(world: int) -> AsyncIterator[tuple[Pilot[None], LogPanel, LogView, LogBar]]:
    app = PanelApp(LogStore(world, window=1_000))
    async with app.run_test(size=(100, 20)) as pilot:
        panel = app.query_one(LogPanel)
        yield pilot, panel, app.query_one(LogView), app.query_one(LogBar)


async def test_the_panel_hides_probe_lines_counts_them_and_h_shows_them() -> None:
    async with opened(2) as (pilot, panel, view, bar):
        panel.lines_added(panel.store.add(0, lines(1, ["boot", PROBE, "ready", MODELS])))
        panel.lines_added(panel.store.add(1, lines(1, [PROBE])))  # a batch of probes only
        await pilot.pause(FLUSH_S * 2)
        assert [ln[TEXT] for ln in view.lines] == ["boot", "ready"]
        assert bar.state.hidden == 3 and bar.state.hide_probes
        assert "3 probe lines hidden" in str(bar.render_state(bar.state))

        panel.toggle_probes()  # h
        assert len(view.lines) == 5 and bar.state.hidden == 0
        assert "probes shown" in str(bar.render_state(bar.state))
        panel.lines_added(panel.store.add(0, lines(5, [PROBE])))
        await pilot.pause(FLUSH_S * 2)
        assert len(view.lines) == 6

        panel.toggle_probes()
        assert [ln[TEXT] for ln in view.lines] == ["boot", "ready"] and bar.state.hidden == 4

        panel.show_ranks(1)  # one rank: its own count
        assert view.lines == [] and bar.state.hidden == 1

        panel.show_ranks(None)
        panel.apply_grep_now("GET /health")  # a grep searches every line, probes included
        await pilot.pause(0.1)
        assert len(view.lines) == 3 and panel.model.matches == 3 and bar.state.hidden == 0
        panel.clear_grep()
        assert len(view.lines) == 2 and bar.state.hidden == 4

        assert panel.jump_to(0, 2)  # a check's line that is a probe's: shown, not lost
        assert not panel.model.hide_probes and view.lines[view.cursor or 0][TEXT] == PROBE
