"""Node telemetry over the real test cluster's SSH connections: every node sampled; a node
whose sshd stops turns unreachable within two intervals and recovers when sshd returns."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from sparktui.backend.events import Event, NodeTelemetry
from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import load_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import ROOT
from tests.realparts.conftest import tbm

pytestmark = pytest.mark.realparts


async def test_sampler_marks_a_lost_node_and_recovers(testbed: Any, tmp_path: Path) -> None:
    recipe = load_recipe(ROOT / "recipes" / "demo-tp4" / "recipe.toml")
    cluster = load_cluster(Path(testbed.cluster_file))
    seen: list[tuple[float, NodeTelemetry]] = []

    def on_event(event: Event) -> None:
        if isinstance(event, NodeTelemetry):
            seen.append((time.monotonic(), event))

    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path,
                        on_event=on_event)
    interval = 1.0
    sampler = orch.telemetry(interval=interval)

    async def until(pred: Any, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return time.monotonic()
            await asyncio.sleep(0.1)
        raise AssertionError(f"not within {timeout} s: {[e for _, e in seen[-6:]]}")

    try:
        await orch.connect()
        sampler.start()
        await until(lambda: all(sampler.latest.get(f"node{i}") is not None and
                                sampler.latest[f"node{i}"].status == "ok" for i in range(4)), 10)
        s = sampler.latest["node1"].sample
        assert s is not None and s.mem_total > 0 and s.gpu_note == "no nvidia-smi"
        assert [d.path for d in s.disks] == ["/home/hf"] and s.disks[0].free > 0
        stopped = time.monotonic()
        tbm.stop_sshd(testbed.state_dir, "node2")
        try:
            lost = await until(lambda: sampler.latest["node2"].status != "ok", 6)
            assert lost - stopped <= 2 * interval + 0.5
            assert sampler.latest["node2"].status in ("unreachable", "stale")
            assert all(sampler.latest[f"node{i}"].status == "ok" for i in (0, 1, 3))
        finally:
            tbm.start_sshd(testbed.state_dir, "node2")
        await until(lambda: sampler.latest["node2"].status == "ok", 20)
    finally:
        await orch.close()
