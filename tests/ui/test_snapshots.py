"""Pictures of the console (pytest-textual-snapshot), in the dark default and the light theme.

Deterministic: the 4-node test cluster file is never contacted, the clock is pinned, cursors do
not blink, and log lines are fed through the same messages the Orchestrator's events become.
Update after a deliberate change with ``pytest tests/ui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from sparktui.backend.events import ChecksChanged, LogBatch, NodeTelemetry, RankChanged
from sparktui.core.ranks import RankSnapshot
from sparktui.core.telemetry import DiskSample, NodeSample
from sparktui.ui.app import SparkApp
from sparktui.ui.messages import BackendEvent
from tests.ui.conftest import wait_for

THEMES = ["sparktui-dark", "sparktui-light"]
pytestmark = pytest.mark.usefixtures("same_renderer")
SIZE = (120, 36)

BOOT = [
    "sparktui demo engine (not a real model) rank {r}/4",
    "Init torch distributed begin.",
    "DEMO rendezvous ok: world=4 rank={r} peers=0@10.0.0.1,1@10.0.0.2,2@10.0.0.3,3@10.0.0.4",
    "Load weight begin. avail mem=119.53 GB",
    "Load weight end. type=DemoForCausalLM, dtype=torch.bfloat16, avail mem=77.36 GB",
    "KV cache ready: #tokens=65536, K size: 1.50 GB, V size: 1.50 GB",
    "NCCL WARN rank {r}: retrying connection to peer (transient error 110)",
    "Capture cuda graph end. Time elapsed: 0.40 s.",
    "demo tick 1",
    "demo tick 2",
]


def _lines(rank: int) -> list[tuple[int, str, str]]:
    return [(i + 1, f"2026-01-01T12:00:{i:02d}.{rank:03d}000Z", f"[12:00:{i:02d} TP{rank}] " + text.format(r=rank))
            for i, text in enumerate(BOOT)]


async def _opened(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe to open")
    await pilot.pause()


async def _running(pilot: Pilot[None]) -> None:
    """Four ranks that booted, as the Orchestrator would report them."""
    await _opened(pilot)
    app = pilot.app
    assert isinstance(app, SparkApp)
    main = app.main_screen
    assert main.session is not None
    checks = main.session.orch.checks
    for rank in range(4):
        node = main.session.plan.ranks[rank].node
        main.post_message(BackendEvent(RankChanged(RankSnapshot(
            rank, node, "ready", container_id=f"c0ffee00000{rank}", health=200, has_container=True))))
        main.post_message(BackendEvent(LogBatch("offline", rank, _lines(rank))))
        updates = checks.feed(rank, [(no, text) for no, _ts, text in _lines(rank)])
        main.post_message(BackendEvent(ChecksChanged(updates, checks.snapshot())))
    await wait_for(pilot, lambda: len(main.logs.view.lines) == 4 * len(BOOT), 5, "the fed lines")
    main.logs.view.focus()
    await pilot.pause()


@pytest.mark.parametrize("theme", THEMES)
def test_idle_main_screen(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp],
                          theme: str) -> None:
    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=_opened)


@pytest.mark.parametrize("theme", THEMES)
def test_help(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp], theme: str) -> None:
    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=_opened, press=["question_mark"])


@pytest.mark.parametrize("theme", THEMES)
def test_plan_modal(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp],
                    theme: str) -> None:
    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=_opened, press=["p"])


@pytest.mark.parametrize("theme", THEMES)
def test_running_cluster(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp],
                         theme: str) -> None:
    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=_running)


@pytest.mark.parametrize("theme", THEMES)
def test_restart_confirmation(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp],
                              theme: str) -> None:
    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=_running, press=["2", "r"])


@pytest.mark.parametrize("theme", THEMES)
def test_logs_side_by_side(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp],
                           theme: str) -> None:
    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=_running, press=["g"])


@pytest.mark.parametrize("theme", THEMES)
def test_grep_active(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp],
                     theme: str) -> None:
    async def grep(pilot: Pilot[None]) -> None:
        await _running(pilot)
        await pilot.press("slash", *"nccl|rendezvous", "enter", "n")

    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=grep)


def _sample(avail_gib: float, total_gib: float, unified: bool, gpu: str) -> NodeSample:
    from sparktui.core.telemetry import GpuSample

    mem = None if unified else 143771 * 2**20
    gpus = [GpuSample(0, gpu, 97.0, 71.0, 95.0 if unified else 690.6, None if unified else 2**30, mem)]
    return NodeSample(mem_total=int(total_gib * 2**30), mem_available=int(avail_gib * 2**30),
                      unified=unified, load1=3.2, cpu_ticks=(1, 2), gpus=gpus,
                      disks=[DiskSample("/home/kilork/mia-state/engram", 61 * 2**30, 900 * 2**30)])


async def _nodes_low_memory(pilot: Pilot[None]) -> None:
    """Telemetry as the sampler reports it: the head's unified memory running out."""
    await _opened(pilot)
    app = pilot.app
    assert isinstance(app, SparkApp)
    main = app.main_screen
    for i in range(12):
        avail = 60.0 - 5 * i  # the head falls from 60 GiB to 5.5 GiB
        head = _sample(max(5.5, avail), 119.7, True, "NVIDIA GB10")
        warnings = [] if head.mem_available >= 8 * 2**30 else [
            ("low-memory", "head memory low: 5.5 GiB available (warn below 8.0 GiB)")]
        main.post_message(BackendEvent(NodeTelemetry("spark1", "ok", head, 40.0, warnings=warnings)))
        main.post_message(BackendEvent(NodeTelemetry("spark2", "ok", _sample(88.0 - i, 119.7, True,
                                                                            "NVIDIA GB10"), 35.0)))
        main.post_message(BackendEvent(NodeTelemetry("spark3", "ok", _sample(90.0, 119.7, True,
                                                                            "NVIDIA GB10"), 30.0)))
    main.post_message(BackendEvent(NodeTelemetry("spark4", "unreachable", None, None,
                                                "connection to spark4.lan:22 refused (is sshd running?)")))
    await wait_for(pilot, lambda: "spark4" in main.nodes_panel.latest, 5, "the fed samples")
    await pilot.pause()


@pytest.mark.parametrize("theme", THEMES)
def test_nodes_panel_low_memory(snap_compare: Callable[..., bool],
                                offline_app: Callable[..., SparkApp], theme: str) -> None:
    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=_nodes_low_memory)
