"""The liveness canary on the real 4-node test cluster: a group whose head answers ``/health`` 200
while rank 3's engine is stopped (SIGSTOP) and the head's completions hang is marked wedged by
the canary within two intervals, and the ``[restart]`` watchdog restarts it; events.jsonl has
every step."""

from __future__ import annotations

import contextlib
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

from tests.conftest import ROOT
from tests.runner import Cli, run_events, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

DEMO = ROOT / "recipes" / "demo-tp4" / "recipe.toml"
SLUG = "demo-canary"
EVERY, TIMEOUT = 2.0, 1.0
SLACK = 2.0  # the watch's event loop and the SSH channel on a loaded machine


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo-tp4 with a canary every 2 s (1 s to answer) and a group restart policy."""
    folder = tmp_path_factory.mktemp("recipes") / SLUG
    folder.mkdir()
    text = DEMO.read_text().replace('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"')
    (folder / "recipe.toml").write_text(
        text + '\n[restart]\npolicy = "group"\nmax = 2\nwindow = "6h"\n'
        f'\n[liveness]\nevery = "{EVERY:g}s"\ntimeout = "{TIMEOUT:g}s"\n')
    return folder


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return state_env(tmp_path_factory.mktemp("canary-state"))


@pytest.fixture(scope="module")
def cli(testbed: Any, recipe: Path, env: dict[str, str]) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, env, recipe)
    yield run
    run("down")


def engine_pid(testbed: Any, index: int) -> tuple[str, int]:
    """The rank's container id and its engine process (found as test_group's ``kill_engine``
    finds it, less the init process: a stopped init would stop nothing)."""
    client = docker.DockerClient(base_url=f"unix://{testbed.nodes[index].docker_socket}")
    found = client.containers.list(filters={"label": f"sparktui.recipe={SLUG}"})
    assert len(found) == 1, found
    top = found[0].top()
    pid_col, cmd_col = top["Titles"].index("PID"), top["Titles"].index("CMD")
    # the engine itself, not the container's init (``docker run --init``) whose command names it
    pids = [int(p[pid_col]) for p in top["Processes"]
            if "sparktui.demo.engine" in p[cmd_col] and "docker-init" not in p[cmd_col]]
    assert len(pids) == 1, top
    return found[0].id, pids[0]


def status(cli: Cli) -> dict[str, Any]:
    res = cli("status", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def wait_for(what: Callable[[], Any], timeout: float, why: str) -> Any:
    end = time.monotonic() + timeout
    while not (found := what()):
        assert time.monotonic() < end, f"timed out waiting for {why}"
        time.sleep(0.2)
    return found


def test_a_stopped_rank_wedges_the_group_and_the_watchdog_restarts_it(
        cli: Cli, testbed: Any, recipe: Path, env: dict[str, str], tmp_path: Path) -> None:
    up = cli("up", "--wait")
    assert up.returncode == 0, up.stderr
    run_id = status(cli)["run"]
    out = tmp_path / "watch.err"
    argv = [sys.executable, "-m", "sparktui", "watch", str(recipe), "--cluster", testbed.cluster_file]
    with out.open("w") as err:
        watch = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
    stopped: int | None = None
    try:
        wait_for(lambda: "watching" in out.read_text() or watch.poll() is not None, 20, "watching")
        assert watch.poll() is None, out.read_text()
        # the watch's canary answers through the head's SSH channel: a real completion
        wait_for(lambda: any(e["kind"] == "canary" and e["ok"] for e in run_events(env, run_id)), 15,
                 "a canary that answered")
        st = status(cli)
        assert st["canary"]["last"]["ok"] and not st["canary"]["wedged"], st["canary"]
        before = [r["container_id"] for r in st["ranks"]]

        old3, stopped = engine_pid(testbed, 3)
        os.kill(stopped, signal.SIGSTOP)
        stopped_at = time.time()
        try:
            wedged = wait_for(lambda: [e for e in run_events(env, run_id) if e["kind"] == "wedged"],
                              2 * EVERY + TIMEOUT + 10, "the group marked wedged")
        except AssertionError:
            raise AssertionError(f"not wedged: {run_events(env, run_id)[-8:]}\n{out.read_text()}") from None
        # within two intervals (the next canary and the one after it, each bounded by its timeout)
        assert wedged[0]["at"] - stopped_at <= 2 * EVERY + TIMEOUT + SLACK, (wedged, stopped_at)
        assert wedged[0]["reason"].startswith("the canary completion failed twice in a row: "
                                              "POST /generate on "), wedged
        assert wedged[0]["reason"].endswith(f"timed out after {TIMEOUT:g} s"), wedged

        def restarted() -> dict[str, Any] | None:
            s = status(cli)
            fresh = [r["state"] for r in s["ranks"]] == ["ready"] * 4 and all(
                r["container_id"] not in before for r in s["ranks"])
            return s if fresh else None

        def ready_again() -> bool:  # as the watch wrote it: no sparktui process a poll
            evs = run_events(env, run_id)
            marks = [i for i, e in enumerate(evs) if e["kind"] == "watchdog"]
            return bool(marks) and {e["rank"] for e in evs[marks[0]:] if e["kind"] == "rank"
                                    and e["state"] == "ready"} == {0, 1, 2, 3}

        wait_for(ready_again, 90, "every rank ready after the watchdog's group restart")
        st = wait_for(restarted, 30, "the watchdog's group restart")
        assert st["run"] == run_id  # the same run
        assert [r["restarts"] for r in st["ranks"]] == [1, 1, 1, 1]
    finally:
        if stopped is not None:  # the old container is gone after the restart; if not, end it
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
                os.kill(stopped, signal.SIGKILL)
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(20) == 0

    said = out.read_text()
    assert "the group is wedged: the canary completion failed twice in a row" in said, said
    assert "watchdog: restarting the whole group (1 of 2 in 6h): the group is wedged" in said, said
    evs = run_events(env, run_id)
    steps: list[str] = []
    for e in evs:
        if e["kind"] == "canary":
            steps.append("ok" if e["ok"] else "fail")
        elif e["kind"] in ("wedged", "unwedged"):
            steps.append(e["kind"])
        elif e["kind"] == "watchdog":
            steps.append(f"watchdog {e['action']}")
        elif e["kind"] == "rank" and e["state"] == "wedged":
            steps.append(f"r{e['rank']} wedged")
        elif e["kind"] == "restart" and e.get("group"):
            steps.append(f"r{e['rank']} restart")
    first = steps.index("fail")
    assert steps[:first] and set(steps[:first]) == {"ok"}, steps  # answered until the stop
    assert steps[first:first + 3] == ["fail", "fail", "wedged"], steps
    assert sorted(steps[first + 3:first + 7]) == ["r0 wedged", "r1 wedged", "r2 wedged", "r3 wedged"], steps
    assert steps[first + 7] == "watchdog restart", steps
    assert sorted(steps[first + 8:first + 12]) == ["r0 restart", "r1 restart", "r2 restart", "r3 restart"]
    dog = [e for e in evs if e["kind"] == "watchdog"]
    assert [d["action"] for d in dog] == ["restart"], dog
    assert dog[0]["reason"].startswith("the group is wedged: the canary completion failed twice"), dog
    assert old3 not in [r["container_id"] for r in status(cli)["ranks"]]
