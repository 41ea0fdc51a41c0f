"""A TP group on the real 4-node test cluster: one rank lost takes the group with it, the whole
group is restarted in the same run, and the restart watchdog does it by itself within its
budget."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import load_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import ROOT
from tests.runner import Cli, run_events, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

DEMO = ROOT / "recipes" / "demo-tp4" / "recipe.toml"
SLUG = "demo-group"


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo-tp4 with a watchdog that may restart the group twice in 6 hours."""
    folder = tmp_path_factory.mktemp("recipes") / SLUG
    folder.mkdir()
    text = DEMO.read_text().replace('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"')
    (folder / "recipe.toml").write_text(text + '\n[restart]\npolicy = "group"\nmax = 2\nwindow = "6h"\n')
    return folder


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return state_env(tmp_path_factory.mktemp("group-state"))


@pytest.fixture(scope="module")
def cli(testbed: Any, recipe: Path, env: dict[str, str]) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, env, recipe)
    yield run
    run("down")


def container(testbed: Any, index: int) -> Any:
    client = docker.DockerClient(base_url=f"unix://{testbed.nodes[index].docker_socket}")
    found = client.containers.list(all=True, filters={"label": f"sparktui.recipe={SLUG}"})
    assert len(found) == 1, found
    return found[0]


def ids(testbed: Any) -> list[str]:
    return [container(testbed, i).id for i in range(4)]


def kill_engine(testbed: Any, index: int) -> None:
    """SIGKILL the engine process inside the rank's container, as a crash would."""
    c = container(testbed, index)
    top = c.top()
    pid_col, cmd_col = top["Titles"].index("PID"), top["Titles"].index("CMD")
    pids = [int(p[pid_col]) for p in top["Processes"] if "sparktui.demo.engine" in p[cmd_col]]
    assert pids, top
    os.kill(pids[0], signal.SIGKILL)


def status(cli: Cli) -> dict[str, Any]:
    res = cli("status", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def wait_status(cli: Cli, want: Callable[[dict[str, Any]], bool], timeout: float, why: str) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while True:
        st = status(cli)
        if want(st):
            return st
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {why}: {st['ranks']}")
        time.sleep(1)


def ready_after_restart(env: dict[str, str], run_id: str, n: int) -> bool:
    """Whether every rank was ready after the watchdog's ``n``-th restart, as the watch itself
    wrote it (its watchdog is armed again then: it arms on those same events)."""
    evs = run_events(env, run_id)
    marks = [i for i, e in enumerate(evs) if e.get("kind") == "watchdog" and e.get("action") == "restart"]
    return len(marks) >= n and {e["rank"] for e in evs[marks[n - 1]:] if e.get("kind") == "rank"
                                and e.get("state") == "ready"} == {0, 1, 2, 3}


async def test_a_lost_rank_fails_the_group_and_restart_group_brings_it_back(
        cli: Cli, testbed: Any, recipe: Path, env: dict[str, str]) -> None:
    up = cli("up", "--wait")
    assert up.returncode == 0, up.stderr
    before = ids(testbed)
    run_id = status(cli)["run"]

    rec = load_recipe(recipe / "recipe.toml")
    cluster = load_cluster(Path(testbed.cluster_file))
    orch = Orchestrator(rec, cluster, build_plan(rec, cluster),
                        state_root=Path(env["XDG_STATE_HOME"]) / "sparktui")
    await orch.connect()
    try:
        assert await orch.attach(follow=True)
        end = time.monotonic() + 20
        while not all(r.state == "ready" for r in orch.ranks):
            assert time.monotonic() < end, [r.state for r in orch.ranks]
            await asyncio.sleep(0.2)
        kill_engine(testbed, 2)
        end = time.monotonic() + 15
        while orch.ranks[2].exit_code is None:  # its container's end noticed
            assert time.monotonic() < end, orch.ranks[2]
            await asyncio.sleep(0.2)
        lost = orch.ranks[2]
        assert lost.health is None  # a failed rank shows no health code
        for r in (0, 1, 3):
            assert orch.ranks[r].state == "failed", orch.ranks[r]
            assert orch.ranks[r].detail.startswith("rank 2 failed first"), orch.ranks[r].detail
        assert orch.failures()[0].rank == 2  # the first to fail is named first
    finally:
        await orch.close()

    again = cli("restart", "--group", "--wait")
    assert again.returncode == 0, again.stderr
    after = ids(testbed)
    assert all(a != b for a, b in zip(after, before, strict=True)), "every container is new"
    st = status(cli)
    assert st["run"] == run_id  # the same run
    assert [r["state"] for r in st["ranks"]] == ["ready"] * 4
    assert [r["restarts"] for r in st["ranks"]] == [1, 1, 1, 1]
    logs = cli("logs", "--grep", "restarted with its group by the operator").stdout.splitlines()
    assert sorted(line.split()[0] for line in logs) == ["r0", "r1", "r2", "r3"]


def test_watchdog_restarts_the_group_within_its_budget(cli: Cli, testbed: Any, recipe: Path,
                                                        env: dict[str, str], tmp_path: Path) -> None:
    st = wait_status(cli, lambda s: [r["state"] for r in s["ranks"]] == ["ready"] * 4, 30, "ready")
    restarts = [r["restarts"] for r in st["ranks"]]
    out = tmp_path / "watch.err"
    argv = [sys.executable, "-m", "sparktui", "watch", str(recipe), "--cluster", testbed.cluster_file]
    with out.open("w") as err:
        watch = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        end = time.monotonic() + 20
        while "watching" not in out.read_text():
            assert watch.poll() is None, out.read_text()
            assert time.monotonic() < end, out.read_text()
            time.sleep(0.2)
        time.sleep(2)  # the watch sees every rank ready: armed
        for n in (1, 2):
            before = ids(testbed)
            kill_engine(testbed, 1)  # the others fall with it; rank 1 is named first
            end = time.monotonic() + 60  # watched in the run's events: no sparktui process a poll
            while not ready_after_restart(env, st["run"], n):
                assert watch.poll() is None, out.read_text()
                assert time.monotonic() < end, f"watchdog restart {n}: {out.read_text()}"
                time.sleep(0.2)
            st = wait_status(cli, lambda s, b=before: [r["state"] for r in s["ranks"]] == ["ready"] * 4
                             and all(r["container_id"] not in b for r in s["ranks"]), 60,
                             f"watchdog restart {n}")
            assert [r["restarts"] for r in st["ranks"]] == [c + n for c in restarts]
        kill_engine(testbed, 3)
        end = time.monotonic() + 20
        while "restart budget spent (2 in 6h)" not in out.read_text():
            assert time.monotonic() < end, out.read_text()
            time.sleep(0.3)
        time.sleep(2)
        st = status(cli)
        assert st["ranks"][3]["state"] == "failed"
        assert [r["restarts"] for r in st["ranks"]] == [c + 2 for c in restarts]  # no third
    finally:
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(15) == 0
    said = out.read_text()
    assert said.count("watchdog: restarting the whole group") == 2, said
    assert "(1 of 2 in 6h): rank 1 failed after ready" in said
    assert "(2 of 2 in 6h): rank 1 failed after ready" in said
    run_dir = Path(env["XDG_STATE_HOME"]) / "sparktui" / "runs" / st["run"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    dog = [(e["action"], e["reason"].split(":")[0]) for e in events if e.get("kind") == "watchdog"]
    assert dog == [("restart", "rank 1 failed after ready"), ("restart", "rank 1 failed after ready"),
                   ("budget-spent", "rank 3 failed after ready")]
    shown = cli("status")
    assert "restart budget spent" in shown.stdout + shown.stderr
