"""The kernel's verdict on the real 4-node test cluster: the seed on the demo engine with
``[memory] limit = "96m"`` (each rank's container memory limit), rank 2 taking 256 MiB in steps.
Its container is killed by the kernel at the limit; ``up --wait``, ``status`` and ``status
--json`` name the out-of-memory kill with its time and container, read from the kernel's
messages (the nodes share this machine's kernel: matched by container id); the other ranks are
not named as killed; the run's events hold it. Then a group restart after the kill: it checks
every node's memory against the launch's baseline (the figures said, in the events) before the
new containers start, and every rank reaches ready (the spike is taken once only:
``SPARKTUI_DEMO_ALLOC_ONCE`` in the rank's ``/state``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SEED
from tests.realparts.test_seed_checks import EXTRA, SLUG, seed_checkpoints, seed_on_demo
from tests.runner import Cli, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

TIMEOUT_S = 20
KILLED = re.compile(r"killed by the kernel: out of memory, (\d\d:\d\d:\d\d), container "
                    rf"sparktui-{re.escape(SLUG)}-r2 \(process python3, pid \d+\), exit code 137")


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("oom-state")


@pytest.fixture(scope="module")
def recipe(testbed: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    seed_checkpoints(testbed)
    assert "[memory]" not in SEED.read_text()
    return seed_on_demo(tmp_path_factory.mktemp("recipes") / SLUG, [
        (f'    "{EXTRA}",\n', ""),  # the seed checks' line no image prints: the restart must pass
        ('[boot]\ntimeout = "20m"\n', f'[boot]\ntimeout = "{TIMEOUT_S}s"\n'),
        ('DSV41_LAUNCHER = "tp4"\n', 'DSV41_LAUNCHER = "tp4"\nSPARKTUI_DEMO_ALLOC_RANK = "2"\n'
                                     'SPARKTUI_DEMO_ALLOC = "256M"\nSPARKTUI_DEMO_ALLOC_EVERY = "0.2"\n'
                                     'SPARKTUI_DEMO_ALLOC_ONCE = "/state/oom-spike"\n'
                                     'SPARKTUI_DEMO_BOOT_SECONDS = "6"\n'),
    ], tail='\n[memory]\nlimit = "96m"\n')


@pytest.fixture(scope="module")
def cli(testbed: Any, recipe: Path, state: Path) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, state_env(state), recipe)
    yield run
    run("down")


def test_a_rank_past_its_memory_limit_is_named_killed_by_the_kernel(cli: Cli, testbed: Any,
                                                                     recipe: Path, state: Path) -> None:
    plan = json.loads(cli("plan", "--json").stdout)
    assert all(r["container"]["memory_limit"] == 96 << 20 for r in plan["ranks"]), plan["ranks"][0]
    assert "--memory 100663296 --memory-swap 100663296" in plan["ranks"][2]["docker_run"]
    up = subprocess.run([sys.executable, "-m", "sparktui", "up", str(recipe), "--wait",
                         "--cluster", testbed.cluster_file], cwd=ROOT, env=state_env(state),
                        capture_output=True, text=True, timeout=TIMEOUT_S + 60)
    assert up.returncode == 1, up.stdout + up.stderr
    said = KILLED.search(up.stderr)
    assert said is not None, up.stderr  # the live follower read the kernel's line
    # status (another process: attaches, finds the verdict in the run's events)
    text = cli("status").stdout
    assert KILLED.search(" ".join(text.split())) is not None, text
    status = json.loads(cli("status", "--json").stdout)
    ranks = status["ranks"]
    r2 = ranks[2]
    assert r2["state"] == "failed" and r2["exit_code"] == 137, r2
    m = KILLED.search(r2["detail"])
    assert m is not None and m.group(1) == said.group(1), r2
    assert all("killed by the kernel" not in r["detail"] for r in ranks if r["rank"] != 2), ranks
    events = [json.loads(line) for line in
              (state / "sparktui" / "runs" / status["run"] / "events.jsonl").read_text().splitlines()]
    oom = [e for e in events if e["kind"] == "oom-killed"]
    assert len(oom) == 1 and oom[0]["rank"] == 2 and oom[0]["container_id"] == r2["container_id"]
    assert oom[0]["process"] == "python3" and oom[0]["clock"] == said.group(1), oom

    # a group restart after the kill: memory checked (or waited for) with its figures, then ready
    again = subprocess.run([sys.executable, "-m", "sparktui", "restart", str(recipe), "--group",
                            "--wait", "--cluster", testbed.cluster_file], cwd=ROOT,
                           env=state_env(state), capture_output=True, text=True, timeout=TIMEOUT_S + 60)
    assert again.returncode == 0, again.stdout + again.stderr
    figures = re.compile(r"memory (checked before the restart|back after \d+ s[^:]*): node0: "
                         r"[\d.]+ [KMGT]?i?B available, [\d.]+ [KMGT]?i?B needed")
    assert figures.search(" ".join(again.stderr.split())), again.stderr
    status = json.loads(cli("status", "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4, status["ranks"]
    assert [r["restarts"] for r in status["ranks"]] == [1, 1, 1, 1], status["ranks"]
    events = [json.loads(line) for line in
              (state / "sparktui" / "runs" / status["run"] / "events.jsonl").read_text().splitlines()]
    waited = [e for e in events if e["kind"] == "memory-wait"]
    assert waited and {n["node"] for n in waited[-1]["nodes"]} == {f"node{i}" for i in range(4)}, waited
    assert any(e["kind"] == "memory-baseline" for e in events), [e["kind"] for e in events]
