"""What the follower keeps as its status document, and when it keeps none (an Orchestrator of the
demo recipe on the local cluster; nothing started: its ranks set as a follower sees them)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sparktui.backend.events import NodeTelemetry, RankChanged
from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.statusdoc import StatusKeeper
from sparktui.config import cluster_plan
from sparktui.core.cluster import local_cluster
from sparktui.core.recipe import load_recipe
from sparktui.core.statusdoc import STATUS_FILE
from sparktui.core.telemetry import NodeSample
from tests.conftest import RECIPES

SAMPLE = NodeSample(128 * 2**30, 100 * 2**30, True, 0.5, (1, 2))


@pytest.fixture
def orch(tmp_path: Path) -> Orchestrator:
    recipe = load_recipe(RECIPES / "demo-tp4" / "recipe.toml")
    cluster = local_cluster(4)
    o = Orchestrator(recipe, cluster, cluster_plan(recipe, cluster, tmp_path), state_root=tmp_path)
    o.board.run = o.store.create(recipe.slug)
    for info in o.ranks:
        info.container_id, info.state, info.health = f"local-{info.rank:012d}", "ready", 200
    return o


def sampled(orch: Orchestrator, nodes: list[str]) -> None:
    """The follower's sampler, running, with a sample of each of ``nodes``."""
    sampler = orch.telemetry()
    sampler._tasks = [object()]  # type: ignore[list-item]  # running, as far as the keeper asks
    sampler.latest = {n: NodeTelemetry(n, "ok", SAMPLE) for n in nodes}


def test_nothing_is_kept_until_the_followers_first_look_is_whole(orch: Orchestrator) -> None:
    keeper = StatusKeeper(orch._kept_document, print)
    assert not keeper.keep()  # no sampler: up --wait, logs -f
    sampled(orch, ["local0", "local1", "local2"])
    assert not keeper.keep()  # local3 not sampled yet
    sampled(orch, ["local0", "local1", "local2", "local3"])
    orch.who = "the watch"
    assert keeper.keep() and keeper.written == 1
    assert orch.run is not None
    doc = json.loads((orch.run.dir / STATUS_FILE).read_text())
    assert doc["source"]["follower"] == "the watch" and time.time() - doc["source"]["at"] < 5
    assert [n["node"] for n in doc["nodes"]] == ["local0", "local1", "local2", "local3"]
    assert [r["state"] for r in doc["ranks"]] == ["ready"] * 4
    assert doc["plan_hash"] == orch.plan.plan_hash and doc["run"] == orch.run.id


def test_a_container_down_removed_is_no_container(orch: Orchestrator) -> None:
    """As a status that attaches afterwards finds it: the follower that ran ``down`` says the
    same."""
    orch.ranks[1].removed = True
    assert [r["container_id"] for r in orch.status()] == [
        "local-000000000000", None, "local-000000000002", "local-000000000003"]


async def test_what_status_shows_changing_wakes_the_keeper_at_once(orch: Orchestrator) -> None:
    keeper = StatusKeeper(orch._kept_document, print)
    keeper.touch(NodeTelemetry("local0", "ok", SAMPLE))  # a good sample: the next second's
    assert not keeper._wake.is_set()
    keeper.touch(NodeTelemetry("local0", "stale", SAMPLE))
    assert keeper._wake.is_set()
    keeper._wake.clear()
    keeper.touch(RankChanged(orch.ranks[0].snapshot()))
    assert keeper._wake.is_set()
