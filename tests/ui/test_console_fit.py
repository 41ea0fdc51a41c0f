"""The console's ``u`` on the local cluster when the demo model's snapshot in this machine's HF
cache declares more weights than the machine has memory: the refusal is said as ``up``'s error,
each node named with its figures, and no rank starts."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sparktui.ui.app import SparkApp
from tests.staging.ckpt import sparse_checkpoint
from tests.ui.conftest import wait_for

SIZE = (120, 40)


async def test_u_with_weights_beyond_memory_says_each_node_and_starts_nothing(
        live_app: Callable[[], SparkApp]) -> None:
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    sparse_checkpoint(Path(os.environ["HF_HOME"]), "sparktui/demo-model", 4 * (total + 2**30))
    app = live_app()
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the demo recipe to open")
        await pilot.press("u")
        await wait_for(pilot, lambda: any(n.level == "error" and n.text.startswith("up: ")
                                          for n in main.state.notices), 20, "up's answer")
        [said] = [n.text for n in main.state.notices if n.text.startswith("up: ")]
        assert said.startswith("up: local0: needs about "), said
        assert all(f"local{i}: needs about " in said for i in range(4)), said
        assert said.endswith("nothing was started (free memory there, or give each node less to "
                             "hold; up --no-memory-check starts anyway)"), said
        assert all(main.ranks_table.states.get(r) in (None, "pending") for r in range(4))
        await pilot.press("q")
