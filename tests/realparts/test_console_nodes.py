"""The console's nodes panel on the real 4-node test cluster: every node's memory and disk,
updating; a node whose sshd stops turns unreachable within two intervals and comes back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.conftest import RECIPES
from tests.realparts.conftest import tbm
from tests.ui.conftest import wait_for

pytestmark = pytest.mark.realparts


async def test_nodes_panel_follows_the_test_cluster(testbed: Any) -> None:
    options = ConsoleOptions([RECIPES], Path(testbed.cluster_file), state_root=state_dir(),
                             recipe="demo-tp4", remember=False, telemetry_interval=1.0)
    app = SparkApp(options)
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 20, "the recipe to open on the test cluster")
        panel = main.nodes_panel
        names = [f"node{i}" for i in range(4)]
        await wait_for(pilot, lambda: all(panel.latest.get(n) is not None and
                                          panel.latest[n].status == "ok" for n in names),
                       15, "a sample from every node")
        first = len(panel.history["node1"])
        await wait_for(pilot, lambda: len(panel.history["node1"]) >= first + 2, 10, "updates")
        text = str(panel.render())
        for n in names:
            assert n in text
        assert "GiB" in text
        sample = panel.latest["node0"].sample
        assert sample is not None and sample.disks and sample.disks[0].path == "/home/hf"
        stopped = time.monotonic()
        tbm.stop_sshd(testbed.state_dir, "node2")
        try:
            await wait_for(pilot, lambda: panel.latest["node2"].status != "ok", 5, "node2 lost")
            assert time.monotonic() - stopped <= 2 * 1.0 + 1.0
            assert panel.latest["node2"].status in ("unreachable", "stale")
            assert "unreachable" in str(panel.render()) or "stale" in str(panel.render())
        finally:
            tbm.start_sshd(testbed.state_dir, "node2")
        await wait_for(pilot, lambda: panel.latest["node2"].status == "ok", 25, "node2 back")
