"""What the console showed is what ``sparktui status`` says after it quit, and what the next
console shows on reattaching: the same check counts per rank, the same verdict per check.

The demo group comes up, the operator adds a check whose line never appears, then rank 2
crashes after ready (an NCCL traceback) and the group falls apart. No rank is ready afterwards,
so no later process can finish the checks from an "every rank ready"; it must learn from the
run that the boot had ended (the reported 5/11 where the console had shown 10/11).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.add_check_screen import AddCheckScreen
from tests.conftest import RECIPES, ROOT
from tests.ui.conftest import DEMO, wait_for

SIZE = (120, 40)
ADDED = "DEMO added by the operator, never printed"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparktui", *args], cwd=ROOT, env={**os.environ},
                          capture_output=True, text=True, timeout=60)


@dataclass
class Demo:
    folder: Path

    def app(self) -> SparkApp:
        return SparkApp(ConsoleOptions([self.folder.parent], None, state_root=state_dir(),
                                       recipe=DEMO, remember=False))


@pytest.fixture
def crashing_demo(tmp_path: Path) -> Iterator[Demo]:
    """The demo recipe (same name) whose rank 2 crashes 3 s after the group is ready."""
    folder = tmp_path / "recipes" / DEMO
    folder.mkdir(parents=True)
    text = (RECIPES / DEMO / "recipe.toml").read_text()
    (folder / "recipe.toml").write_text(text.replace(
        'SPARKTUI_DEMO_TICK = "1"',
        'SPARKTUI_DEMO_TICK = "1"\nSPARKTUI_DEMO_FAIL_RANK = "2"\nSPARKTUI_DEMO_FAIL_AFTER = "3"'))
    yield Demo(folder)
    cli("down", str(folder))


async def test_status_and_reattach_show_what_the_console_showed(crashing_demo: Demo) -> None:
    first = crashing_demo.app()
    async with first.run_test(size=SIZE) as pilot:
        main = first.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open")
        assert main.session is not None
        orch = main.session.orch
        await pilot.press("u")
        await wait_for(pilot, lambda: [main.ranks_table.states.get(r) for r in range(4)] == ["ready"] * 4,
                       40, "every rank ready")
        await pilot.press("plus")
        await wait_for(pilot, lambda: isinstance(first.screen, AddCheckScreen), 5, "add check dialog")
        await pilot.press(*ADDED)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(c.added for c in orch.checks.checks), 10, "the added check")
        # rank 2 crashes, the others fall with it; wait until every container has exited
        await wait_for(pilot, lambda: all(i.state == "failed" and i.exit_code is not None
                                          for i in orch.ranks), 40, "the group to fall apart")
        await pilot.pause(1.0)  # the last lines and verdicts reach the screen
        shown = {r: main.state.check_summary(r) for r in range(4)}
        panel = main.checks_panel.checks
        assert panel is not None
        verdicts = {(c.kind, c.pattern): panel.overall(c) for c in panel.checks}
        assert all(s["pending"] == 0 for s in shown.values()), shown
        assert shown[0]["failed"] >= 2, shown  # the added check, and the NCCL error seen on rank 2
        assert verdicts[("must_show", ADDED)] == "failed"
        assert verdicts[("must_not_show", "Traceback (most recent call last):")] == "failed"
        # beside the console, status shows the console's own document: what it shows
        beside = json.loads((await asyncio.to_thread(
            cli, "status", str(crashing_demo.folder), "--json")).stdout)
        assert beside["source"]["follower"] == "the console", beside["source"]
        assert {r["rank"]: r["checks"] for r in beside["ranks"]} == shown
        assert {(c["kind"], c["pattern"]): c["state"] for c in beside["checks"]} == verdicts
        await pilot.press("q")

    res = cli("status", str(crashing_demo.folder), "--json")
    assert res.returncode == 0, res.stderr
    status = json.loads(res.stdout)
    assert status["source"]["follower"] is None  # the console gone: worked out here
    assert {r["rank"]: r["checks"] for r in status["ranks"]} == shown
    assert {(c["kind"], c["pattern"]): c["state"] for c in status["checks"]} == verdicts

    second = crashing_demo.app()
    async with second.run_test(size=SIZE) as pilot:
        main = second.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open again")
        assert main.session is not None and main.session.attached
        await wait_for(pilot, lambda: {r: main.state.check_summary(r) for r in range(4)} == shown, 10,
                       "the same counts after reattaching")
        panel = main.checks_panel.checks
        assert panel is not None
        assert {(c.kind, c.pattern): panel.overall(c) for c in panel.checks} == verdicts
        await pilot.press("q")
