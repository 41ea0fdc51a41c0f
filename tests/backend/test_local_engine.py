"""Is the engine alive, and its stacks (issue 27), on the local cluster with real rank
processes: each rank's engine pid, state and CPU seconds; ``dump`` through the demo engine's
stack signal (no py-spy on PATH), in parallel, saved private in the run's folder; an engine
killed under a shell wrapper that keeps the rank alive fails the rank with ``engine_gone``
within one interval. Fixed ports: run it in a private network namespace."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.runtimes.processes import LocalRuntime
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import build_plan
from sparktui.core.procs import DEMO_STACK_SIGNAL
from sparktui.core.recipe import load_recipe
from tests.conftest import RECIPES

INTERVAL = 1.0
WRAPPER = ('entrypoint = ["sh", "-c", \'python3 -m sparktui.demo.engine "$@"; sleep 100000\', '
           '"sh"]')


@pytest.fixture
async def orch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Orchestrator]:
    # no py-spy on this machine's PATH: the dump takes the stack signal's way
    monkeypatch.setenv("PATH", os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not os.path.exists(os.path.join(d, "py-spy"))))
    assert shutil.which("py-spy") is None
    folder = tmp_path / "demo-wrapped"
    folder.mkdir()
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    text = text.replace('entrypoint = ["python3", "-m", "sparktui.demo.engine"]', WRAPPER)
    text = text.replace('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"')
    (folder / "recipe.toml").write_text(text)
    recipe = load_recipe(folder / "recipe.toml")
    cluster = local_cluster(4)
    made = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path / "s",
                        health_interval=INTERVAL)
    await made.connect()
    yield made
    await made.close()
    rt = LocalRuntime(tmp_path / "s" / "local")
    for state in await rt.find({}):
        await rt.remove(state.id)


async def until(what: Callable[[], str], ok: Callable[[], bool], timeout: float) -> None:
    end = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < end, what()
        await asyncio.sleep(0.1)


async def test_engine_liveness_and_a_dump_by_the_stack_signal(orch: Orchestrator) -> None:
    await orch.up()
    assert await orch.wait(timeout=60), [(r.state, r.detail) for r in orch.ranks]
    await until(lambda: "every engine sampled", lambda: all(r.engine is not None and r.engine.pid
                                                    for r in orch.ranks), 5 * INTERVAL)
    for row in orch.status():
        engine = row["engine"]
        assert isinstance(engine, dict) and engine["pid"] and engine["state"][0] in "RS", row
    # the shell that names the engine is not taken for it
    assert all(r.engine is not None and r.engine.pid != orch.runtime.ranks.rank_pid(  # type: ignore[attr-defined]
        r.container_id) for r in orch.ranks)

    result = await orch.dump()
    assert [d.how for d in result.ranks] == [DEMO_STACK_SIGNAL] * 4, [d.note for d in result.ranks]
    for d in result.ranks:
        assert d.stacks[0].startswith(("Thread 0x", "Current thread 0x")), d.stacks
        assert any('File "' in line and "sparktui/demo" in line for line in d.stacks), d.stacks
        assert "the image has no py-spy" in d.note
        assert any(p.comm == "sh" for p in d.processes) and d.last_lines
    assert stat.S_IMODE(result.folder.stat().st_mode) == 0o700
    files = sorted(result.folder.iterdir())
    assert [f.name for f in files] == [f"rank{r}.txt" for r in range(4)]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert orch.run is not None
    dumps = [e for e in orch.run.events() if e["kind"] == "dump"]
    assert dumps and dumps[-1]["folder"] == str(result.folder)
    # in parallel: four ranks took about as long as the slowest of them, not the sum
    slowest = max(d.seconds for d in result.ranks)
    print(f"dump: 4 ranks in {result.seconds:.2f} s, slowest rank {slowest:.2f} s")
    assert result.seconds < 1.5 * slowest + 0.5

    lost = orch.ranks[2]
    assert lost.engine is not None and lost.engine.pid is not None
    killed = time.monotonic()
    os.kill(lost.engine.pid, signal.SIGKILL)
    await until(lambda: f"rank 2 engine_gone: {[(r.state, r.detail, r.engine) for r in orch.ranks]}", lambda: lost.cause is not None
                and lost.cause.code == "engine_gone", 2 * INTERVAL + 1)
    print(f"engine_gone after {time.monotonic() - killed:.2f} s")
    assert lost.state == "failed" and "sh" in lost.detail and "sleep" in lost.detail, lost.detail
    assert lost.detail.startswith("its engine process is gone; the container still runs")
    # the group fell with it, rank 2 named first; its container still runs
    assert all(r.state == "failed" for r in orch.ranks)
    assert orch.failures()[0].rank == 2
    state = await orch.runtimes[lost.node.name].inspect(lost.container_id or "")
    assert state.running
