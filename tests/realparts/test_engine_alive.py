"""Is the engine alive in its container, and every rank's stacks at once (issue 27, done-when 3
and 4), on the real 4-node test cluster: a recipe whose command is a shell wrapper that keeps
the container running after the engine dies; Docker's top through each node's tunnel shows
every rank's engine (pid, state, CPU seconds); ``sparktui dump`` reads every rank's stacks
with py-spy inside its container (the testbed image has it), all ranks at once; the engine
killed inside rank 2's container fails the rank with ``engine_gone`` within one interval."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.backend.dumps import Dumper
from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import load_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import ROOT
from tests.runner import Cli, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

DEMO = ROOT / "recipes" / "demo-tp4" / "recipe.toml"
SLUG = "demo-alive"
INTERVAL = 1.0
WRAPPER = ('entrypoint = ["sh", "-c", \'python3 -m sparktui.demo.engine "$@"; sleep 100000\', '
           '"sh"]')


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recipes") / SLUG
    folder.mkdir()
    text = DEMO.read_text().replace('entrypoint = ["python3", "-m", "sparktui.demo.engine"]', WRAPPER)
    assert WRAPPER in text
    (folder / "recipe.toml").write_text(
        text.replace('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"'))
    return folder


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return state_env(tmp_path_factory.mktemp("alive-state"))


@pytest.fixture(scope="module")
def cli(testbed: Any, recipe: Path, env: dict[str, str]) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, env, recipe)
    yield run
    run("down")


async def until(what: Callable[[], str], ok: Callable[[], bool], timeout: float) -> None:
    end = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < end, what()
        await asyncio.sleep(0.1)


async def test_every_engine_is_seen_dumped_at_once_and_missed_when_gone(
        cli: Cli, testbed: Any, recipe: Path, env: dict[str, str]) -> None:
    up = cli("up", "--wait")
    assert up.returncode == 0, up.stderr
    st = json.loads(cli("status", "--json").stdout)
    for row in st["ranks"]:  # a look of its own: pid, state and CPU seconds
        assert row["engine"]["pid"] and row["engine"]["state"][0] in "RS", row

    dumped = cli("dump", "--json")
    report = json.loads(dumped.stdout)
    assert dumped.returncode == 0, [(r["rank"], r["how"], r["note"], len(r["stacks"]))
                                    for r in report["ranks"]]
    assert [r["how"] for r in report["ranks"]] == ["py-spy"] * 4, [r["note"] for r in report["ranks"]]
    folder = Path(report["folder"])
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(p.name for p in folder.iterdir()) == [f"rank{r}.txt" for r in range(4)]

    rec = load_recipe(recipe / "recipe.toml")
    cluster = load_cluster(Path(testbed.cluster_file))
    orch = Orchestrator(rec, cluster, build_plan(rec, cluster),
                        state_root=Path(env["XDG_STATE_HOME"]) / "sparktui", health_interval=INTERVAL)
    await orch.connect()
    try:
        assert await orch.attach(follow=True)
        await until(lambda: f"every engine seen: {[r.engine for r in orch.ranks]}",
                    lambda: all(r.engine is not None and r.engine.pid for r in orch.ranks), 10)
        assert orch.run is not None and orch.engines is not None

        async def nothing() -> None:  # this process follows: the run's files are written as lines come
            return None

        one = await Dumper(orch.board, orch.runtime, orch.run, nothing).one(orch.ranks[0])  # type: ignore[arg-type]
        assert one.how == "py-spy", one.note
        result = await orch.dump()
        print(f"dump: one rank {one.seconds:.2f} s, all four {result.seconds:.2f} s "
              f"({result.seconds / one.seconds:.2f}x)")
        for d in result.ranks:
            assert d.how == "py-spy", d.note
            assert any("sparktui/demo" in line for line in d.stacks), d.stacks
            assert any(p.comm == "docker-init" for p in d.processes) and d.last_lines
        assert result.seconds < 3 * one.seconds + 1.0  # in parallel (measured: bench/dump.py)

        lost = orch.ranks[2]
        assert lost.engine is not None and lost.engine.pid is not None
        killed = time.monotonic()
        os.kill(lost.engine.pid, signal.SIGKILL)  # the node's pid: the test cluster is this machine
        await until(lambda: f"rank 2 engine_gone: {[(r.state, r.detail) for r in orch.ranks]}",
                    lambda: lost.cause is not None and lost.cause.code == "engine_gone",
                    INTERVAL + 2.0)
        print(f"engine_gone after {time.monotonic() - killed:.2f} s")
        # busybox's sh became its last command: what still runs is the init and the sleep
        assert lost.detail.endswith("docker-init, sleep"), lost.detail
        assert orch.failures()[0].rank == 2
        assert (await orch.runtimes[lost.node.name].inspect(lost.container_id or "")).running
    finally:
        await orch.close()
    events = [json.loads(line) for line in (orch.run.dir / "events.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "rank" and e.get("cause") == "engine_gone" and e["rank"] == 2
               for e in events)
    assert sum(e["kind"] == "dump" for e in events) == 2
