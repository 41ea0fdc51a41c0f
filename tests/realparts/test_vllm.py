"""A vLLM recipe on the real 4-node test cluster: the demo image imitates vLLM from the flags
sparktui appends. Rank 0 serves /health and /v1/models and prints "Application startup
complete."; ranks 1-3 get --headless and open no port, and are ready once they run and rank 0 is
ready. A headless worker killed with `docker kill` is failed within 3 s."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from sparktui.backend.events import Event, RankChanged
from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import load_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import ROOT
from tests.realparts.conftest import tbm
from tests.runner import Cli, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

RECIPE = ROOT / "recipes" / "demo-vllm-tp4"
SLUG = "demo-vllm-tp4"
PORT = 8000



@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vllm-state")


@pytest.fixture(scope="module")
def cli(testbed: Any, state: Path) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, state_env(state), RECIPE)
    yield run
    run("down")


def containers(testbed: Any) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for node in testbed.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        out[node.index] = client.containers.list(all=True, filters={"label": f"sparktui.recipe={SLUG}"})
    return out


def refused(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, port)) != 0


def test_nodes_run_the_image_built_from_this_tree(testbed: Any) -> None:
    """The testbed rebuilds the demo image when sparktui/demo changes: the vLLM mode is in it."""
    _, image_id, _ = tbm.build_image(tbm.Paths(testbed.state_dir))  # cached: the inputs' hash
    for node in testbed.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        assert client.images.get(tbm.IMAGE).id == image_id, node.name


def test_up_wait_reaches_ready_on_four_ranks(cli: Cli, testbed: Any) -> None:
    up = cli("up", "--wait")
    assert up.returncode == 0, up.stderr + up.stdout
    assert "ready: 4 ranks, 12/12 checks passed" in up.stdout  # 11 of the recipe, the args check of rank 0 (headless workers print no dump)
    found = containers(testbed)
    for index, cs in found.items():
        assert len(cs) == 1 and cs[0].status == "running", f"node{index}"
        assert (cs[0].attrs["Args"][-1] == "--headless") == (index > 0)
    status = json.loads(cli("status", "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
    assert status["ranks"][0]["health"] == 200
    assert all(r["checks"]["failed"] == 0 and r["checks"]["pending"] == 0 for r in status["ranks"])

    head, *workers = testbed.nodes
    with urllib.request.urlopen(f"http://{head.ip}:{PORT}/v1/models", timeout=5) as res:
        assert [m["id"] for m in json.load(res)["data"]] == ["demo-vllm-tp4"]
    with urllib.request.urlopen(f"http://{head.ip}:{PORT}/health", timeout=5) as res:
        assert res.status == 200
    assert all(refused(node.ip, PORT) for node in workers)  # --headless: no port on ranks 1-3
    logs = cli("logs", "--rank", "0", "--grep", "Application startup complete")
    assert logs.stdout.startswith("r0 ") and "Application startup complete." in logs.stdout
    worker = cli("logs", "--rank", "2", "--grep", "headless")
    assert "DEMO headless worker ready: rank 2 of 4" in worker.stdout


async def test_killed_headless_worker_is_failed_within_3s(testbed: Any, state: Path) -> None:
    recipe = load_recipe(RECIPE / "recipe.toml")
    cluster = load_cluster(Path(testbed.cluster_file))
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=state / "sparktui")
    failed_at: dict[int, float] = {}

    def on_event(event: Event) -> None:
        if isinstance(event, RankChanged) and event.rank.state == "failed":
            failed_at.setdefault(event.rank.rank, time.monotonic())

    orch.subscribe(on_event)
    await orch.connect()
    assert await orch.attach(follow=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and [r.state for r in orch.ranks] != ["ready"] * 4:
            await asyncio.sleep(0.1)  # attach: booting until the logs show the head ready
        assert [r.state for r in orch.ranks] == ["ready"] * 4
        victim = containers(testbed)[2][0]
        killed = time.monotonic()
        await asyncio.to_thread(victim.kill)  # docker kill, on node2's own engine
        while time.monotonic() < killed + 3 and 2 not in failed_at:
            await asyncio.sleep(0.05)
        assert 2 in failed_at, f"rank 2 is {orch.ranks[2].state} 3 s after docker kill"
        assert failed_at[2] - killed < 3.0
        assert orch.ranks[2].state == "failed"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and orch.ranks[2].exit_code is None:
            await asyncio.sleep(0.1)
        assert orch.ranks[2].exit_code == 137
    finally:
        await orch.close()


def test_down_removes_every_container(cli: Cli, testbed: Any) -> None:
    assert cli("down").returncode == 0
    assert all(not cs for cs in containers(testbed).values())
