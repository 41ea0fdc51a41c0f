"""Write docs/screenshot.svg: the console on the local cluster with the demo recipe running.

    python -m tests.ui.screenshot [OUT.svg]

Uses temporary state and config folders, launches the demo (real rank processes), waits for
every rank to be ready and a few ticks, saves the screen, then takes the ranks down.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


async def shoot(out: Path) -> None:
    from sparktui.config import state_dir
    from sparktui.ui.app import SparkApp
    from sparktui.ui.options import ConsoleOptions

    app = SparkApp(ConsoleOptions([ROOT / "recipes"], None, state_root=state_dir(), recipe="demo-tp4",
                                  cursor_blink=False, remember=False))
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        await asyncio.wait_for(main.ready.wait(), 15)
        await pilot.press("u")
        end = time.monotonic() + 40
        while [main.ranks_table.states.get(r) for r in range(4)] != ["ready"] * 4:
            if time.monotonic() > end:
                raise SystemExit("the demo did not come up")
            await pilot.pause(0.2)
        await pilot.pause(4.5)  # a few ticks, and the toasts fade
        app.clear_notifications()
        await pilot.pause(0.3)
        app.save_screenshot(filename=out.name, path=str(out.parent))
        await pilot.press("x")
        await pilot.pause(0.3)
        await pilot.press("y")
        end = time.monotonic() + 30
        while any(main.ranks_table.states.get(r) != "stopped" for r in range(4)) and time.monotonic() < end:
            await pilot.pause(0.2)
        await pilot.press("q")


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshot.svg"
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = f"{tmp}/state"
        os.environ["XDG_CONFIG_HOME"] = f"{tmp}/config"
        os.environ.setdefault("HF_HOME", f"{tmp}/hf")
        asyncio.run(shoot(out.resolve()))
    print(out)


if __name__ == "__main__":
    main()
