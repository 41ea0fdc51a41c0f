"""Health probes on the real 4-node test cluster travel through each node's SSH connection.

Every node drops connections to the engine's API port that come from outside the node (an
iptables rule in its network namespace, as a real cluster's firewall would): sparktui still sees
every rank ready and healthy, because it asks from the node itself. A lost SSH link gives no
health code (and no crash) until the link is back.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import load_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import ROOT
from tests.realparts.conftest import tbm
from tests.runner import Cli, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

DEMO = ROOT / "recipes" / "demo-tp4"
API_PORT = 30000  # the demo recipe's port; real clusters use no port offset
RULE = ["INPUT", "-p", "tcp", "--dport", str(API_PORT), "!", "-i", "lo", "-j", "DROP",
        "-m", "comment", "--comment", "sparktui-probe-test"]



def iptables(node: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nsenter", f"--net={node.netns_path}", "iptables", "-w", "5", *args],
                          capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def firewalled(testbed: Any) -> Iterator[Any]:
    """The API port closed to everything but the node's own loopback, on every node."""
    for node in testbed.nodes:
        res = iptables(node, "-I", *RULE)
        assert res.returncode == 0, f"{node.name}: iptables: {res.stderr}"
    yield testbed
    for node in testbed.nodes:
        while iptables(node, "-D", *RULE).returncode == 0:
            pass


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("probe-state")


@pytest.fixture(scope="module")
def cli(firewalled: Any, state: Path) -> Iterator[Cli]:
    run = sparktui_cli(firewalled.cluster_file, state_env(state), DEMO)
    run("down")
    yield run
    run("down")


def test_up_and_status_see_health_200_with_the_api_port_closed_to_us(cli: Cli,
                                                                     firewalled: Any) -> None:
    up = cli("up", "--wait")
    assert up.returncode == 0, up.stderr
    assert "ready: 4 ranks" in up.stdout
    # the engines run and listen, yet from this machine their port says nothing at all (every
    # node tried at once: each try waits out its timeout)
    def silent(node: Any) -> bool:
        with pytest.raises(TimeoutError):
            socket.create_connection((node.ip, API_PORT), timeout=1.5).close()
        return True

    with ThreadPoolExecutor(len(firewalled.nodes)) as pool:
        assert all(pool.map(silent, firewalled.nodes))
    status = json.loads(cli("status", "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
    assert [r["health"] for r in status["ranks"]] == [200] * 4


def test_engine_metrics_arrive_through_ssh_with_the_api_port_closed_to_us(cli: Cli) -> None:
    """Issue 29, done-when 3: the head's /metrics scraped from its own node, the port still
    closed to this machine; smoke requests between the readings move its counters."""
    before = cli("top", "--once", "--json", "--over", "0.5")
    assert before.returncode == 0, before.stderr
    first = json.loads(before.stdout)
    assert [r["rank"] for r in first["ranks"]] == [0]  # SGLang: the head serves /metrics
    head = first["ranks"][0]
    assert head["stale"] is None and head["values"]["running"] == 0, head
    with ThreadPoolExecutor(1) as pool:  # requests one after another, across top's readings
        reading = pool.submit(cli, "top", "--once", "--json", "--over", "5")
        smoke = cli("smoke", "--n", "10")
        assert smoke.returncode == 0, smoke.stderr
        top = reading.result()
    assert top.returncode == 0, top.stderr
    after = json.loads(top.stdout)["ranks"][0]
    assert after["stale"] is None, after
    # the TTFT histogram's p95 holds the two requests; tokens were generated between readings
    assert after["values"]["ttft_p95"] is not None and after["values"]["ttft_p95"] > 0, after
    assert after["values"]["prompt_rate"] is not None and after["values"]["prompt_rate"] > 0, after


async def _until(what: Callable[[], bool], timeout: float, why: str) -> None:
    end = time.monotonic() + timeout
    while not what():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {why}")
        await asyncio.sleep(0.2)


async def test_a_lost_ssh_link_shows_no_code_until_it_is_back(cli: Cli, firewalled: Any,
                                                              state: Path) -> None:
    recipe = load_recipe(DEMO / "recipe.toml")
    cluster = load_cluster(Path(firewalled.cluster_file))
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=state / "sparktui")
    try:
        assert not await orch.connect()
        assert await orch.attach(follow=False)
        await orch.refresh_health()
        assert [i.health for i in orch.ranks] == [200] * 4
        loop = asyncio.create_task(orch.health.loop())
        rank2 = orch.ranks[2]
        await asyncio.to_thread(tbm.stop_sshd, firewalled.state_dir, "node2")
        try:
            await _until(lambda: rank2.health is None, 25, "rank 2's code to clear")
            assert await orch.health.probe(rank2) is None  # no exception either
            assert [i.health for i in orch.ranks] == [200, 200, None, 200]
            assert not loop.done()
        finally:
            await asyncio.to_thread(tbm.start_sshd, firewalled.state_dir, "node2")
        await orch.shells["node2"].connect()  # the log follower's job; no follower here
        await _until(lambda: rank2.health == 200, 25, "rank 2 healthy again")
        assert not loop.done()
        orch.health.closed = True
        loop.cancel()
    finally:
        await orch.close()
