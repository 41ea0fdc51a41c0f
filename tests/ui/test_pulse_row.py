"""A pulse row on its own, in a small app: every series' value readable at any width (a narrow
terminal wraps the series onto more lines instead of cutting them), and a lone reading drawn as
a flat line, not as a full bar."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Sparkline

from sparktui.core.engines import sglang
from sparktui.core.metrics import LABELS, shown
from sparktui.ui.widgets.pulse_row import PulseRow

KEYS = tuple(dict.fromkeys(s.key for s in sglang.METRICS.series))
VALUES = {"throughput": 12345.0, "running": 16.0, "queued": 120.0, "kv_use": 100.0,
          "ttft_p50": 2.5, "ttft_p95": 12.34, "accept": 3.45, "cache_hit": 100.0,
          "prompt_rate": 23456.0}  # the widest each is written


class RowApp(App[None]):
    def compose(self) -> ComposeResult:
        yield PulseRow("r0 spark1", KEYS, id="row")


def painted(app: App[None]) -> list[str]:
    """The screen's lines as the compositor lays them out."""
    return [strip.text for strip in app.screen._compositor.render_strips()][:app.size.height]


@pytest.mark.parametrize("width", [40, 60, 100, 160])
async def test_every_value_is_readable_at_any_width(width: int) -> None:
    app = RowApp()
    async with app.run_test(size=(width, 40)) as pilot:
        row = app.query_one(PulseRow)
        row.show(VALUES, {key: [1.0, 2.0, 3.0] for key in KEYS}, "scraped 1s ago", stale=False)
        await pilot.pause()
        screen = "\n".join(painted(app))
        for key in KEYS:
            assert f"{LABELS[key]} {shown(key, VALUES[key])}" in screen, (width, key, screen)


async def test_a_lone_reading_is_a_flat_line() -> None:
    app = RowApp()
    async with app.run_test(size=(160, 20)) as pilot:
        row = app.query_one(PulseRow)
        row.show(VALUES, {KEYS[0]: [5.0], KEYS[1]: [1.0, 5.0]}, "scraped 1s ago", stale=False)
        await pilot.pause()
        lone = app.query_one(f"#spark-{KEYS[0]}", Sparkline)
        assert lone.data == [5.0, 5.0]
        strips = lone.render_lines(lone.region.reset_offset)
        assert "█" not in "".join(s.text for s in strips)
        rising = app.query_one(f"#spark-{KEYS[1]}", Sparkline)
        assert "█" in "".join(s.text for s in rising.render_lines(rising.region.reset_offset))
