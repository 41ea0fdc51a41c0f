"""The liveness canary on the local cluster, for real: four demo ranks, a completion through the
head every half second; a worker stopped by SIGSTOP leaves ``/health`` 200 but hangs the head's
completions, so two canaries in a row fail and the group is wedged; SIGCONT brings it back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from sparktui.backend.events import CanaryChanged, Event
from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe_text
from tests.conftest import RECIPES

LIVENESS = '\n[liveness]\nevery = "500ms"\ntimeout = "400ms"\n'


async def until(what: Callable[[], bool], timeout: float, why: str) -> None:
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, f"timed out waiting for {why}"
        await asyncio.sleep(0.05)


def engine_pid(state_root: Path, container_id: str) -> int:
    """The rank's engine process (the local runtime's pids.json names it)."""
    pids = json.loads((state_root / "local" / container_id / "pids.json").read_text())
    return int(pids["child_pid"])


async def test_a_stopped_worker_wedges_the_group_and_its_return_unwedges_it(tmp_path: Path) -> None:
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    text = text.replace('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"')
    recipe = load_recipe_text(text + LIVENESS, tmp_path / "demo-canary" / "recipe.toml")
    cluster = local_cluster(4)
    state_root = tmp_path / "state"
    seen: list[Event] = []
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=state_root,
                        on_event=seen.append)
    stopped: int | None = None
    try:
        await orch.connect()
        await orch.up()
        assert await orch.wait(timeout=60)
        await until(lambda: any(isinstance(e, CanaryChanged) and e.record.ok for e in seen), 10,
                    "a canary that answered")
        state = orch.canary_state()
        assert state is not None and state.last is not None and state.last.ok and not state.wedged
        assert state.last.latency_ms is not None and state.last.latency_ms < 400

        stopped = engine_pid(state_root, str(orch.ranks[2].container_id))
        os.kill(stopped, signal.SIGSTOP)
        wedged_by = time.monotonic() + 2 * 0.5 + 0.4 + 1.5  # two intervals, a timeout, slack
        await until(lambda: all(r.state == "wedged" for r in orch.ranks), 10, "wedged")
        assert time.monotonic() < wedged_by
        for r in orch.ranks:
            assert r.cause is not None and r.cause.code == "canary"
            assert r.detail.startswith("the canary completion failed twice in a row: POST /generate"), r.detail
            assert r.detail.endswith("timed out after 0.4 s"), r.detail
        assert orch.ranks[0].health == 200  # /health does not see the wedged peer
        state = orch.canary_state()
        assert state is not None and state.wedged and state.last is not None and not state.last.ok

        os.kill(stopped, signal.SIGCONT)
        stopped = None
        await until(lambda: all(r.state == "ready" for r in orch.ranks), 10, "ready again")
        assert orch.run is not None
        kinds = [(e["kind"], e.get("ok")) for e in orch.run.events()
                 if e["kind"] in ("canary", "wedged", "unwedged")]
        first_fail = kinds.index(("canary", False))
        assert kinds[first_fail:first_fail + 3] == [("canary", False), ("canary", False), ("wedged", None)]
        assert ("unwedged", None) in kinds[first_fail + 3:]
        states = [e["state"] for e in orch.run.events() if e["kind"] == "rank" and e["rank"] == 2]
        assert states[-2:] == ["wedged", "ready"]
    finally:
        if stopped is not None:
            with contextlib.suppress(OSError):
                os.kill(stopped, signal.SIGCONT)
        with contextlib.suppress(Exception):
            await orch.down()
        await orch.close()
