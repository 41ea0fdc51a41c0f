"""The cluster backend on the real 4-node test cluster: real sshd, real dockerd per node.

The tests run in file order and share one launch where they can (a launch costs seconds):
up and status, reattach, log following across an sshd restart, a killed rank, restart of one
rank, doctor's failures, a changed host key, down.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from sparktui.backend.memwait import node_leftovers
from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import load_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import ROOT
from tests.realparts.conftest import tbm
from tests.runner import Cli, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

DEMO = ROOT / "recipes" / "demo-tp4"



@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster-state")


@pytest.fixture(scope="module")
def cli(testbed: Any, state: Path) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, state_env(state), DEMO)
    yield run
    run("down")


def containers(testbed: Any, slug: str = "demo-tp4") -> dict[int, list[Any]]:
    """Per node index, this recipe's containers, read straight from that node's engine."""
    out: dict[int, list[Any]] = {}
    for node in testbed.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        out[node.index] = client.containers.list(all=True, filters={"label": f"sparktui.recipe={slug}"})
    return out


def ids(testbed: Any) -> dict[int, str]:
    return {i: cs[0].id for i, cs in containers(testbed).items() if cs}


def orchestrator(testbed: Any, state: Path) -> Orchestrator:
    recipe = load_recipe(DEMO / "recipe.toml")
    cluster = load_cluster(Path(testbed.cluster_file))
    return Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=state / "sparktui")


def test_up_wait_status_logs(cli: Cli, testbed: Any) -> None:
    up = cli("up", "--wait")
    assert up.returncode == 0, up.stderr
    assert "ready: 4 ranks, 15/15 checks passed" in up.stdout  # 11 of the recipe, an args check a rank
    found = containers(testbed)
    for index, cs in found.items():
        assert len(cs) == 1, f"node{index} runs {len(cs)} containers"
        assert cs[0].labels["sparktui.rank"] == str(index)
        assert cs[0].status == "running"
    status = json.loads(cli("status", "--json").stdout)
    assert [r["node"] for r in status["ranks"]] == ["node0", "node1", "node2", "node3"]
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
    assert [r["health"] for r in status["ranks"]] == [200] * 4
    assert [r["container_id"] for r in status["ranks"]] == [found[i][0].id for i in range(4)]
    assert all(r["checks"]["failed"] == 0 and r["checks"]["pending"] == 0 for r in status["ranks"])
    logs = cli("logs", "--rank", "2", "--grep", "rendezvous ok")
    assert logs.returncode == 0
    assert re.search(r"^r2 .*DEMO rendezvous ok: world=4 rank=2", logs.stdout, re.M)
    assert "r0 " not in logs.stdout


def test_reattach_does_not_relaunch(cli: Cli, testbed: Any) -> None:
    before = ids(testbed)
    again = cli("up", "--wait")
    assert again.returncode == 0, again.stderr
    assert "already running: reattached, nothing relaunched" in again.stderr
    assert ids(testbed) == before
    status = json.loads(cli("status", "--json").stdout)
    assert {r["rank"]: r["container_id"] for r in status["ranks"]} == before


async def test_following_survives_sshd_restart(testbed: Any, state: Path) -> None:
    orch = orchestrator(testbed, state)
    await orch.connect()
    assert await orch.attach(follow=True)
    assert orch.following
    await asyncio.sleep(2)
    tbm.stop_sshd(testbed.state_dir, "node2")
    try:
        await asyncio.sleep(5)
    finally:
        tbm.start_sshd(testbed.state_dir, "node2")
    assert orch.run is not None
    log = orch.run.log(2)
    # what the container had written when its node's sshd was back (its engine, read directly):
    # the run's file is waited for until it holds two ticks past that, caught up after the outage
    own = containers(testbed)[2][0].logs().decode(errors="replace")
    back = len(re.findall(r"demo tick \d+$", own, re.M))
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        ticks = [int(m.group(1)) for _, _, t in log.read() if (m := re.search(r"demo tick (\d+)$", t))]
        if len(ticks) > max(12, back + 1):
            break
    await orch.close()
    ticks = [int(m.group(1)) for _, _, t in log.read() if (m := re.search(r"demo tick (\d+)$", t))]
    assert ticks, "no tick lines captured"
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks))), "gap or duplicate in rank 2's log"
    assert ticks[0] == 1  # everything since boot, across every sparktui process so far


async def test_killed_rank_is_failed_with_exit_code(testbed: Any, state: Path) -> None:
    orch = orchestrator(testbed, state)
    await orch.connect()
    assert await orch.attach(follow=True)
    try:
        c = containers(testbed)[1][0]
        procs = c.top()["Processes"]
        titles = c.top()["Titles"]
        pid_col, cmd_col = titles.index("PID"), titles.index("CMD")
        engine = [int(p[pid_col]) for p in procs if "sparktui.demo.engine" in p[cmd_col]]
        assert engine, procs
        os.kill(engine[0], signal.SIGKILL)
        deadline = time.monotonic() + 15
        # its peers may report the lost collective before its own exit is read: it is failed
        # (the group fell) first, and named as the first to go once its exit code arrives
        while time.monotonic() < deadline and not orch.ranks[1].ended:
            await asyncio.sleep(0.2)
        info = orch.ranks[1]
        assert info.state == "failed"
        assert info.exit_code == 137
        assert "exited with code 137" in info.detail
        assert info.last_lines and "demo tick" in "".join(info.last_lines)
    finally:
        await orch.close()


def test_restart_replaces_only_that_rank(cli: Cli, testbed: Any) -> None:
    assert cli("down").returncode == 0
    assert cli("up", "--wait").returncode == 0
    before = ids(testbed)
    res = cli("restart", "--rank", "2")
    assert res.returncode == 0, res.stderr
    after = ids(testbed)
    assert after[2] != before[2]
    assert {i: after[i] for i in (0, 1, 3)} == {i: before[i] for i in (0, 1, 3)}
    logs = cli("logs", "--rank", "2").stdout.splitlines()
    marker = [i for i, line in enumerate(logs) if "--- sparktui: rank 2 restarted by the operator" in line]
    assert len(marker) == 1
    assert any("DEMO rendezvous ok" in line for line in logs[: marker[0]])  # same run, before
    assert len(logs) > marker[0] + 1  # and the new container's lines after it
    status = json.loads(cli("status", "--json").stdout)
    assert [r["restarts"] for r in status["ranks"]] == [0, 0, 1, 0]
    assert status["ranks"][2]["container_id"] == after[2]


async def test_a_restart_finds_the_old_container_s_processes_by_its_cgroup(
        cli: Cli, testbed: Any, state: Path) -> None:
    """What a restart waits for (``backend/memwait``): the node's processes whose cgroup names
    the container, listed by the fixed script over SSH; none once it is removed. The launch
    recorded every node's memory before its first container started."""
    orch = orchestrator(testbed, state)
    await orch.connect()
    try:
        assert await orch.attach(follow=False)
        assert sorted(orch.baselines) == ["node0", "node1", "node2", "node3"]
        assert all(0 < b.available <= b.total for b in orch.baselines.values())
        c = containers(testbed)[2][0]
        top = c.top()
        pid_col = top["Titles"].index("PID")
        shell = orch.shells[orch.ranks[2].node.name]
        assert await node_leftovers(shell, c.id) == sorted(int(p[pid_col]) for p in top["Processes"])
        assert await node_leftovers(shell, "0" * 64) == []
    finally:
        await orch.close()


def _variant(tmp: Path, name: str, replace: tuple[str, str] | None = None, append: str = "") -> Path:
    text = (DEMO / "recipe.toml").read_text()
    if replace:
        text = text.replace(*replace)
    folder = tmp / name
    folder.mkdir(exist_ok=True)
    (folder / "recipe.toml").write_text(text.replace("[boot]", append + "\n[boot]"))
    return folder


def test_doctor_reports_each_problem_per_node(cli: Cli, testbed: Any, tmp_path: Path) -> None:
    ok = cli("doctor", "--json")
    findings = json.loads(ok.stdout)
    assert {f["node"] for f in findings} >= {"node0", "node1", "node2", "node3"}
    assert ("all", "same image", "passed") in {(f["node"], f["check"], f["verdict"]) for f in findings}
    assert ok.returncode == 0, [f for f in findings if f["verdict"] == "failed"]

    missing = _variant(tmp_path, "missing-image", ('docker_image = "sparktui-demo:latest"',
                                                   'docker_image = "sparktui-demo:nope"'))
    res = cli("doctor", "--json", recipe=missing)
    assert res.returncode == 1
    image = [f for f in json.loads(res.stdout) if f["check"] == "image"]
    assert len(image) == 4 and all(f["verdict"] == "failed" for f in image)
    assert "image sparktui-demo:nope is not on this node" in image[0]["sentence"]

    full = _variant(tmp_path, "full-disk", append='[[staging]]\nkind = "sparse-rows"\nid = "engram"\n'
                    'src = "{{hf}}/hub/x"\ndst = "/home/kilork/stage"\nmin_free = "1000T"\n')
    res = cli("doctor", "--json", recipe=full)
    assert res.returncode == 1
    staging = [f for f in json.loads(res.stdout) if f["check"] == "staging engram"]
    assert len(staging) == 4 and all(f["verdict"] == "failed" for f in staging)
    assert re.search(r"/home/kilork/stage (\(not there yet; in /home[^)]*\) )?has .* free, "
                     r"needs 1000\.0 TiB", staging[0]["sentence"])

    tbm.stop_sshd(testbed.state_dir, "node3")
    try:
        res = cli("doctor", "--json")
    finally:
        tbm.start_sshd(testbed.state_dir, "node3")
    assert res.returncode == 1
    node3 = [f for f in json.loads(res.stdout) if f["node"] == "node3"]
    assert node3 == [{"node": "node3", "check": "ssh", "verdict": "failed",
                      "sentence": "connection to 10.250.0.14:22 refused (is sshd running?)"}]


def test_doctor_makes_no_folder_on_any_node(cli: Cli, testbed: Any, tmp_path: Path) -> None:
    """A check reads: a staging dst that does not exist yet is reported through the folder the
    agent would make it in, and is still not there afterwards."""
    tag = os.urandom(4).hex()
    recipe = _variant(tmp_path, "doctor-reads", append='[[staging]]\nkind = "sparse-rows"\n'
                      f'id = "engram"\nsrc = "{{{{hf}}}}/hub/x"\ndst = "/home/doctor-{tag}/a/b"\n')
    made = [Path(n.home) / f"doctor-{tag}" for n in testbed.nodes]
    try:
        res = cli("doctor", "--json", recipe=recipe)
        assert [str(p) for p in made if p.exists()] == []
    finally:
        for p in made:
            shutil.rmtree(p, ignore_errors=True)
    staging = [f for f in json.loads(res.stdout) if f["check"] == "staging engram"]
    assert len(staging) == 4 and all(f["verdict"] == "passed" for f in staging), staging
    assert staging[0]["sentence"].startswith(f"/home/doctor-{tag}/a/b (not there yet; in /home) "
                                             "writable, "), staging[0]["sentence"]


def test_changed_host_key_is_refused(cli: Cli, testbed: Any) -> None:
    tbm.rekey(testbed.state_dir, "node1")
    try:
        res = cli("doctor", "--json")
    finally:
        tbm.rekey(testbed.state_dir, "node1", restore=True)
    assert res.returncode == 1
    (finding,) = [f for f in json.loads(res.stdout) if f["node"] == "node1"]
    assert finding["check"] == "ssh" and finding["verdict"] == "failed"
    assert finding["sentence"].startswith("host key of 10.250.0.12:22 is not trusted by")
    assert "refusing to connect" in finding["sentence"]
    status = cli("status")
    assert "node1: host key of 10.250.0.12:22 is not trusted" not in status.stderr  # restored


def test_down_removes_every_container(cli: Cli, testbed: Any) -> None:
    assert cli("down").returncode == 0
    assert all(not cs for cs in containers(testbed).values())

