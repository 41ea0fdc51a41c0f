"""A third runtime, registered from this file alone: the CLI and the console drive it through
the Orchestrator with no change anywhere but this file and the runtime registry.

``procs`` runs each rank as a local process of its own (kept under ``<state>/procs``, apart from
the local cluster's), reached with no shell and no SSH. It declares only what it can do: its
ranks (and their logs), connections as the node sees them (``NodeProbe``) and one rank replaced
alone (``RestartOne``); no ``NodeExec``, ``Stage``, ``Images``, ``Telemetry`` or ``Preflight``,
so those paths degrade as ``runtimes/base.py`` says. Real demo ranks on fixed ports: run in a
private network namespace.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sparktui.backend.http import ByteReader, ByteWriter, Opener
from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.runtime import Containers
from sparktui.backend.runtimes.base import (
    Allocation,
    Images,
    NodeExec,
    NodeProbe,
    RestartOne,
    Stage,
    Telemetry,
)
from sparktui.backend.runtimes.processes import LocalRuntime
from sparktui.backend.runtimes.registry import RUNTIMES, register, unregister
from sparktui.cli import main
from sparktui.config import state_dir
from sparktui.core.cluster import Cluster, Node, load_cluster
from sparktui.core.errors import SparkError
from sparktui.core.kinds import KINDS, Kind
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.conftest import RECIPES
from tests.ui.conftest import wait_for

KIND = Kind("procs", shown="test processes", on_this_machine=True, node_shell=False)
DEMO = "demo-tp4"


class Bare:
    """Only what every runtime has: ranks, connect, describe, close."""

    def __init__(self, cluster: Cluster, nodes: list[Node], state_root: Path) -> None:
        self.kind = KIND
        self.ranks = LocalRuntime(state_root / "procs")

    def containers(self, node: str) -> Containers:
        return self.ranks

    async def connect(self, node: str) -> None:
        return None

    def describe(self, node: str) -> str:
        return "this machine (bare)"

    async def close(self) -> None:
        return None


class Procs(Bare):
    """Ranks as this machine's processes, under a runtime of their own."""

    def describe(self, node: str) -> str:
        return "this machine (procs)"

    def opener(self, node: str) -> Opener:
        async def here(host: str, port: int) -> tuple[ByteReader, ByteWriter]:
            return await asyncio.open_connection(host, port)
        return here

    def shown_host(self, node: str) -> str:
        return "127.0.0.1"

    async def retire(self, node: str, container_id: str, timeout: float) -> None:
        await self.ranks.stop(container_id, timeout=timeout)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Path]:
    """The runtime registered, and a cluster file of its kind (4 nodes on this machine)."""
    register(KIND, Procs)
    nodes = "".join(f'[[nodes]]\nname = "p{i}"\nhost = "localhost"\nfabric_ip = "127.0.0.1"\n'
                    f"port_offset = {i}\n" for i in range(4))
    path = tmp_path / "procs.toml"
    path.write_text(f'name = "procs"\nkind = "procs"\nhf_cache = "{tmp_path / "hf"}"\n{nodes}')
    yield path
    cli("down", path)
    unregister(KIND.name)
    assert "procs" not in RUNTIMES and "procs" not in KINDS


def cli(verb: str, cluster: Path, *args: str) -> int:
    return main([verb, str(RECIPES / DEMO), "--cluster", str(cluster), *args])


def test_the_runtime_declares_what_it_can_do(tmp_path: Path) -> None:
    rt = Procs(None, [], tmp_path)  # type: ignore[arg-type]
    assert isinstance(rt, NodeProbe) and isinstance(rt, RestartOne)
    assert not isinstance(rt, NodeExec | Stage | Images | Telemetry)


def test_plan_up_logs_restart_down_through_the_cli(procs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("plan", procs) == 0
    assert "procs (test processes) · 4 ranks" in capsys.readouterr().out

    assert cli("up", procs, "--wait") == 0, capsys.readouterr().err
    capsys.readouterr()
    assert cli("status", procs, "--json") == 0
    ranks = json.loads(capsys.readouterr().out)["ranks"]
    assert [r["state"] for r in ranks] == ["ready"] * 4
    assert all(r["container_id"].startswith("local-") for r in ranks)
    folder = state_dir() / "procs"  # the runtime's own folder, not the local cluster's
    assert len(list(folder.glob("local-*"))) == 4 and not (state_dir() / "local").exists()

    assert cli("logs", procs, "--rank", "0") == 0
    assert "The server is fired up" in capsys.readouterr().out

    old = ranks[1]["container_id"]
    assert cli("restart", procs, "--rank", "1") == 0, capsys.readouterr().err
    capsys.readouterr()
    assert cli("status", procs, "--json") == 0
    after = json.loads(capsys.readouterr().out)["ranks"]
    assert after[1]["restarts"] == 1 and after[1]["container_id"] != old
    assert [r["container_id"] for i, r in enumerate(after) if i != 1] == \
        [r["container_id"] for i, r in enumerate(ranks) if i != 1]
    assert cli("logs", procs, "--rank", "1") == 0
    assert "rank 1 restarted by the operator" in capsys.readouterr().out

    assert cli("doctor", procs) in (0, 1)  # no Preflight, no NodeExec: only the link
    assert "this machine (procs)" in capsys.readouterr().out

    assert cli("down", procs) == 0
    capsys.readouterr()
    assert cli("status", procs, "--json") == 0
    assert all(r["container_id"] is None for r in json.loads(capsys.readouterr().out)["ranks"])
    assert list(folder.glob("local-*")) == []


async def test_the_console_opens_and_drives_it(procs: Path) -> None:
    options = ConsoleOptions([RECIPES], procs, state_root=state_dir(), recipe=DEMO)
    app = SparkApp(options)
    async with app.run_test(size=(120, 40)) as pilot:
        main_screen = app.main_screen
        await wait_for(pilot, main_screen.ready.is_set, 15, "the demo recipe to open")
        session = main_screen.session
        assert session is not None and session.orch.runtime.kind is KIND
        assert not session.orch.can_sync_images
        await pilot.press("u")
        await wait_for(pilot, lambda: [r.state for r in session.orch.ranks] == ["ready"] * 4, 40,
                       "every rank ready")
        assert session.orch.run is not None
        assert "The server is fired up" in session.orch.run.log(0).path.read_text()
        await session.orch.down()
        assert all(not r.has_container for r in session.orch.ranks)


async def test_what_a_runtime_cannot_do_is_refused_or_left_out(procs: Path, tmp_path: Path) -> None:
    """No ``RestartOne``: one rank is not replaced alone; no ``NodeProbe``: no port check, no
    smoke; no ``Images``: no image check (``up`` skips it) and no sync; no ``Stage``, no
    ``Telemetry``: a sampler of no node. Nothing is started by any of them."""
    register(KIND, Bare)
    recipe = load_recipe(RECIPES / DEMO / "recipe.toml")
    cluster = load_cluster(procs)
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path / "s")
    try:
        with pytest.raises(SparkError, match="replaces the whole group only"):
            await orch.restart(1)
        with pytest.raises(SparkError, match="opens no connection on a node"):
            await orch.smoke()
        with pytest.raises(SparkError, match="runs test processes, not images"):
            await orch.image_sync()
        assert await orch.check_ports() == [] and not orch.can_sync_images
        assert orch.telemetry().nodes == [] and await orch.sample_nodes() == []
        assert [(f.check, f.sentence) for f in await orch.doctor()] == [
            ("ssh", "this machine (bare)")] * 4
    finally:
        await orch.close()
    assert not (tmp_path / "s" / "procs").exists()


class Scheduled(Procs):
    """``Procs`` whose nodes come from a scheduler (``Allocation``): the test holds the nodes
    back, says why, then gives them; ``release`` is recorded."""

    gate: asyncio.Event
    released: list[str]

    async def allocate(self, plan: object, run_id: str, waiting: Callable[[str], None]) -> None:
        waiting("job 7 pending (Resources)")
        await Scheduled.gate.wait()

    async def release(self) -> None:
        Scheduled.released.append("released")


async def test_ranks_wait_queued_with_the_schedulers_reason(procs: Path, tmp_path: Path) -> None:
    register(KIND, Scheduled)
    Scheduled.gate, Scheduled.released = asyncio.Event(), []
    recipe = load_recipe(RECIPES / DEMO / "recipe.toml")
    cluster = load_cluster(procs)
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path / "s")
    assert isinstance(orch.runtime, Allocation)
    try:
        up = asyncio.create_task(orch.up(port_check=False))
        for _ in range(100):
            if all(r.state == "queued" for r in orch.ranks):
                break
            await asyncio.sleep(0.05)
        assert [r.state for r in orch.ranks] == ["queued"] * 4
        assert all(r.detail == "waiting for the scheduler: job 7 pending (Resources)"
                   for r in orch.ranks)
        assert all(r.container_id is None for r in orch.ranks)  # nothing started while queued
        Scheduled.gate.set()
        await up
        assert await orch.wait(timeout=60)
        await orch.down()
        assert Scheduled.released == ["released"]
    finally:
        await orch.close()
