"""Pictures of the console (pytest-textual-snapshot), in the dark default and the light theme.

Deterministic: the 4-node test cluster file is never contacted, the clock is pinned, cursors do
not blink, and log lines are fed through the same messages the Orchestrator's events become.
Update after a deliberate change with ``pytest tests/ui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from sparktui.ui.app import SparkApp
from sparktui.ui.messages import ChecksUpdated, HealthUpdated, LogLines, RankUpdated
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
        main.session.orch.ranks[rank].container_id = f"c0ffee00000{rank}"  # as attach() would set it
        main.post_message(RankUpdated(rank, "ready"))
        main.post_message(HealthUpdated(rank, 200))
        main.post_message(LogLines(None, rank, _lines(rank)))
        main.post_message(ChecksUpdated(checks.feed(rank, [(no, text) for no, _ts, text in _lines(rank)])))
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
def test_restart_confirmation(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp],
                              theme: str) -> None:
    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=_running, press=["2", "r"])


@pytest.mark.parametrize("theme", THEMES)
def test_grep_active(snap_compare: Callable[..., bool], offline_app: Callable[..., SparkApp],
                     theme: str) -> None:
    async def grep(pilot: Pilot[None]) -> None:
        await _running(pilot)
        await pilot.press("slash", *"nccl|rendezvous", "enter", "n")

    assert snap_compare(offline_app(theme), terminal_size=SIZE, run_before=grep)
