"""The metrics scraper against a real HTTP server on each rank's port (a page in SGLang's real
format), and sparktui's own exposition read back by the Prometheus client's parser."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.backend.board import Board
from sparktui.backend.events import Event, MetricsChanged
from sparktui.backend.exporter import StateCollector, listen_address, serve
from sparktui.backend.metrics import MetricsScraper
from sparktui.backend.nodeshell import LocalShell
from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import Plan, build_plan
from sparktui.core.ranks import Cause
from sparktui.core.recipe import load_recipe
from tests.conftest import RECIPES
from tests.core.test_metrics import sglang_page

DEMO = RECIPES / "demo-tp4" / "recipe.toml"


@dataclass
class Page:
    """A real HTTP server answering /metrics with ``body`` (and ``status``)."""

    body: str
    status: int = 200
    asked: list[str] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.asked.append(head.split()[1].decode())
        data = self.body.encode()
        writer.write(b"HTTP/1.1 %d X\r\nContent-Type: text/plain; version=0.0.4\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (self.status, len(data))
                     + data)
        await writer.drain()
        writer.close()


@pytest.fixture
async def ranks() -> AsyncIterator[tuple[Plan, Board, list[Event], list[Page]]]:
    """The demo recipe (SGLang) on the local cluster, every rank's port answered by a page."""
    cluster = local_cluster(4)
    plan = build_plan(load_recipe(DEMO), cluster)
    events: list[Event] = []
    board = Board(plan, [cluster.nodes[r.rank] for r in plan.ranks], events.append)
    pages = [Page(page(1)) for _ in plan.ranks]
    servers = [await asyncio.start_server(p.handle, "127.0.0.1", r.port)
               for p, r in zip(pages, plan.ranks, strict=True)]
    for info in board.ranks:
        info.container_id = f"c{info.rank}"
        board.set_state(info, "creating")
        board.set_state(info, "booting")
        board.set_state(info, "ready")
    yield plan, board, events, pages
    for s in servers:
        s.close()
        await s.wait_closed()


def page(n: int) -> str:
    """SGLang's page after ``n`` rounds of load: counters and the TTFT histogram grow."""
    return sglang_page(running=2 * n, queued=n, throughput=100.0 * n, usage=0.1 * n, hit=0.5,
                       prompt=1000.0 * n, ttft=(n, 2 * n, 3 * n, 4 * n, 4 * n, 4 * n))


def scraper(board: Board) -> MetricsScraper:
    return MetricsScraper(board, {i.node.name: LocalShell(i.node).open_connection
                                  for i in board.ranks}, 5.0)


async def test_only_the_head_is_scraped_and_its_pulse_moves(
        ranks: tuple[Plan, Board, list[Event], list[Page]]) -> None:
    _plan, board, events, pages = ranks
    s = scraper(board)
    assert s.ranks == [0]  # SGLang's workers serve no /metrics
    await s.scrape_all()
    pages[0].body = page(3)
    await s.scrape_all()
    assert pages[0].asked == ["/metrics", "/metrics"] and all(not p.asked for p in pages[1:])
    values = s.pulses[0].values()
    assert values["running"] == 6 and values["queued"] == 3 and values["throughput"] == 300
    assert values["kv_use"] == pytest.approx(30.0)
    assert values["prompt_rate"] is not None and values["prompt_rate"] > 0
    assert values["ttft_p95"] is not None and 0 < values["ttft_p95"] <= 1.0  # 8 new, all <= 1 s
    said = [e for e in events if isinstance(e, MetricsChanged)]
    assert [e.rank for e in said] == [0, 0] and said[-1].stale is None
    assert s.pulses[0].history("running") == [2.0, 6.0]


async def test_a_404_a_malformed_page_and_a_stopped_rank_are_stale_with_why(
        ranks: tuple[Plan, Board, list[Event], list[Page]]) -> None:
    _plan, board, events, pages = ranks
    s = scraper(board)
    await s.scrape_all()
    pages[0].status = 404
    await s.scrape_all()
    pulse = s.pulses[0]
    assert pulse.stale == ("GET /metrics answered 404 (the engine serves none without "
                           "--enable-metrics)")
    assert pulse.values()["running"] == 2  # the last good values kept
    pages[0].status, pages[0].body = 200, "sglang:num_running_reqs{a=\"1\"} not-a-number\n"
    await s.scrape_all()
    assert pulse.stale is not None and "not Prometheus text" in pulse.stale
    board.set_state(board.ranks[0], "failed", Cause("exited", 1))
    await s.scrape_all()
    await s.scrape_all()
    assert pulse.stale == "not running (failed)" and pulse.values()["running"] == 2
    stale_news = [e.stale for e in events if isinstance(e, MetricsChanged)]
    assert stale_news.count("not running (failed)") == 1  # said once, not every round


async def test_a_restarted_rank_starts_a_new_pulse(
        ranks: tuple[Plan, Board, list[Event], list[Page]]) -> None:
    _plan, board, _events, pages = ranks
    s = scraper(board)
    await s.scrape_all()
    pages[0].body = page(5)
    await s.scrape_all()
    old = s.pulses[0]
    head = board.ranks[0]
    head.container_id, head.restarts = "c0-new", 1
    pages[0].body = page(1)  # its counters began again
    await s.scrape_all()
    assert s.pulses[0] is not old and s.pulses[0].history("running") == [2.0]


async def test_the_exposition_has_every_rank_s_state_and_the_engine_series(
        ranks: tuple[Plan, Board, list[Event], list[Page]], tmp_path: Path) -> None:
    """``watch --metrics``' body, read back by the client's own parser; on loopback by default.
    The Orchestrator's own scraper, through the local runtime's openers."""
    plan, _board, _events, _pages = ranks
    orch = Orchestrator(load_recipe(DEMO), local_cluster(4), plan, state_root=tmp_path)
    for info in orch.ranks:
        info.container_id = f"c{info.rank}"
        for state in ("creating", "booting", "ready"):
            orch.board.set_state(info, state)  # type: ignore[arg-type]
    await orch.metrics.scrape_all()
    orch.board.set_state(orch.ranks[3], "failed", Cause("exited", 1))
    collector = StateCollector(orch)
    collector.refresh()
    assert listen_address("9400") == ("127.0.0.1", 9400)
    assert listen_address("[::1]:9400") == ("::1", 9400)
    with pytest.raises(ValueError, match="PORT or HOST:PORT"):
        listen_address("host:port")
    server = serve(collector, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        text = (await asyncio.to_thread(lambda: urllib.request.urlopen(url).read())).decode()
    finally:
        server.shutdown()
        server.server_close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    states = {(s.labels["rank"], s.labels["state"]): s.value
              for s in families["sparktui_rank_state"].samples}
    assert [r for (r, st), v in sorted(states.items()) if v == 1] == ["0", "1", "2", "3"]
    assert states[("0", "ready")] == 1 and states[("3", "failed")] == 1
    assert states[("3", "ready")] == 0
    running = families["sglang:num_running_reqs"].samples
    assert [(s.labels["rank"], s.labels["node"], s.value) for s in running] == [("0", "local0", 2.0)]
    prompt = families["sglang:prompt_tokens"]
    assert prompt.type == "counter" and prompt.samples[0].value == 1000.0
    assert {s.labels["rank"] for s in families["sparktui_rank_restarts"].samples} == {"0", "1", "2", "3"}
