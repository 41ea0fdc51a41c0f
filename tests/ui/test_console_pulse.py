"""The pulse view on the local cluster (issue 29, done-when 2): ``recipes/demo-tp4`` scraped
every second while smoke requests come and go; what the view shows is the demo's own counters;
the head killed, its row is stale within two intervals, its last values kept."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from textual.widgets import Sparkline, Static

from sparktui.backend.http import request
from sparktui.config import state_dir
from sparktui.core.metrics import parse_exposition, shown
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.pulse_screen import PulseScreen
from tests.conftest import RECIPES
from tests.ui.conftest import sparktui, wait_for

SLUG = "demo-pulse"
INTERVAL = 1.0


@pytest.fixture
def pulse_app(tmp_path: Path) -> Iterator[Callable[[], SparkApp]]:
    """The demo recipe scraped every second, in a recipes folder of its own; down afterwards."""
    folder = tmp_path / "recipes" / SLUG
    folder.mkdir(parents=True)
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    assert "--enable-metrics" in text
    (folder / "recipe.toml").write_text(text + f'\n[metrics]\ninterval = "{INTERVAL:g}s"\n')

    def make() -> SparkApp:
        return SparkApp(ConsoleOptions([folder.parent], None, state_root=state_dir(), recipe=SLUG))

    yield make
    sparktui("down", str(folder))


async def test_the_pulse_follows_the_load_and_goes_stale_when_the_head_dies(
        pulse_app: Callable[[], SparkApp]) -> None:
    app = pulse_app()
    async with app.run_test(size=(160, 48)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
        await pilot.press("u")
        table = main.ranks_table
        await wait_for(pilot, lambda: [table.states.get(r) for r in range(4)] == ["ready"] * 4,
                       40, "every rank ready")
        assert main.session is not None
        orch = main.session.orch
        scraper = orch.metrics
        assert scraper.ranks == [0] and scraper.interval == INTERVAL

        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, PulseScreen), 5, "the pulse view")
        screen = app.screen
        assert isinstance(screen, PulseScreen)
        await wait_for(pilot, lambda: 0 in scraper.pulses and scraper.pulses[0].last_ok is not None,
                       10, "a first scrape")

        def now(key: str) -> float | None:
            return scraper.pulses[0].values()[key]  # type: ignore[index]

        def on_screen(key: str) -> str:
            return str(screen.query_one(f"#pulse-r0 #value-{key}", Static).render())

        # idle: nothing running
        await wait_for(pilot, lambda: now("running") == 0, 10, "an idle head")
        # a smoke loop, 3 at once: running and throughput rise
        sent = 12
        loop = asyncio.create_task(orch.smokes(sent, concurrency=3))
        await wait_for(pilot, lambda: (now("running") or 0) > 0 and (now("throughput") or 0) > 0,
                       20, "running and throughput rising")
        peak = now("running")
        assert peak is not None and peak <= 4  # the demo runs at most 4 at once
        assert on_screen("running").endswith(shown("running", now("running")))
        outcomes = await loop
        assert all(not isinstance(o, BaseException) for o in outcomes), outcomes
        # over: running back to 0, throughput falls to 0 (the demo's last 5 s), TTFT p95 known
        await wait_for(pilot, lambda: now("running") == 0 and now("throughput") == 0, 20,
                       "running and throughput falling")
        history = scraper.pulses[0].history("throughput")
        assert max(history) > 0 and history[-1] == 0
        p95 = now("ttft_p95")
        assert p95 is not None and p95 > 0
        assert on_screen("ttft_p95").endswith(shown("ttft_p95", p95))
        spark = screen.query_one("#pulse-r0 #spark-throughput", Sparkline)

        def drawn() -> bool:  # the sparkline shows the pulse's history (repainted each second)
            now = scraper.pulses[0].history("throughput")
            return bool(spark.data) and list(spark.data or []) == now[-len(spark.data or []):]

        await wait_for(pilot, drawn, 5, "the sparkline drawn from the history")
        await pilot.press("z")  # the sparklines' span: the last 24 readings
        await wait_for(pilot, lambda: len(spark.data or []) == min(24, len(
            scraper.pulses[0].history("throughput"))), 5, "the shorter span")
        assert "the last 24s" in str(screen.query_one("#pulse-status", Static).render())

        # what the view read is the demo's own counters (idle now: nothing moves between)
        page = await request("127.0.0.1", orch.plan.ranks[0].port, "/metrics")
        own = parse_exposition(page.body.decode(), 0.0, scraper.spec)
        seen = scraper.last[0]
        assert seen.values == own.values
        ttft = "sglang:time_to_first_token_seconds"
        assert own.buckets[ttft][-1][1] == seen.buckets[ttft][-1][1] >= sent  # every request

        # the head killed: stale within two intervals, the last values kept
        head = orch.ranks[0]
        assert head.container_id is not None
        for proc in await orch.runtime.processes(head.node.name, head.container_id):  # type: ignore[attr-defined]
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        killed = asyncio.get_running_loop().time()
        await wait_for(pilot, lambda: scraper.pulses[0].stale is not None, 2 * INTERVAL + 1.5,
                       "the head's pulse stale")
        took = asyncio.get_running_loop().time() - killed
        assert took <= 2 * INTERVAL + 1.5, took
        await wait_for(pilot, lambda: "stale" in str(
            screen.query_one("#pulse-r0 .pulse-head", Static).render()), 3, "stale on screen")
        assert screen.query_one("#pulse-r0").has_class("-stale")
        assert now("ttft_p95") == p95  # kept


async def test_a_row_shown_while_its_parts_are_not_there_is_shown_whole_once_they_are() -> None:
    """CI's console lane met a repaint of a row whose parts were not composed yet (the screen
    laying its rows out again as the scraper learned its ranks): ``NoMatches`` out of the
    timer. Such a show does nothing and forgets what was shown, so the next shows it all."""
    from textual.app import App

    from sparktui.ui.widgets.pulse_row import PulseRow

    row = PulseRow("r0 local0", ("running",), id="pulse-r0")
    row.show({"running": 3.0}, {"running": [1.0, 3.0]}, "scraped 0s ago", stale=False)  # unmounted
    async with App().run_test() as pilot:
        await pilot.app.screen.mount(row)
        row.show({"running": 3.0}, {"running": [1.0, 3.0]}, "scraped 0s ago", stale=False)
        await pilot.pause()
        head = row.query_one(".pulse-head", Static)
        assert "scraped 0s ago" in str(head.render())
        assert "3" in str(row.query_one("#value-running", Static).render())
        assert row.query_one("#spark-running", Sparkline).data == [1.0, 3.0]
