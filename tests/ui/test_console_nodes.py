"""The nodes panel on the local cluster: real samples of this machine, the panel toggle, and the
smoke key against a head that is not running (one sentence, no crash)."""

from __future__ import annotations

from collections.abc import Callable

from sparktui.ui.app import SparkApp
from tests.ui.conftest import wait_for

SIZE = (120, 40)


async def test_nodes_panel_samples_and_smoke_reports(live_app: Callable[[], SparkApp]) -> None:
    app = live_app()
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open")
        panel = main.nodes_panel
        await wait_for(pilot, lambda: len(panel.latest) == 4 and all(
            t.status == "ok" for t in panel.latest.values()), 15, "a sample from every local node")
        sample = panel.latest["local0"].sample
        assert sample is not None and 0 < sample.mem_available <= sample.mem_total
        assert "local3" in str(panel.render())
        await pilot.press("m")
        assert not panel.display
        await pilot.press("m")
        assert panel.display
        await pilot.press("k")
        await wait_for(pilot, lambda: any("smoke" in e.text and "cannot reach" in e.text
                                          for e in main.state.notices), 15, "the smoke error")
