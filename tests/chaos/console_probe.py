"""The console as the soak's follower: ``python -m tests.chaos.console_probe RECIPE_DIR SLUG
CLUSTER STATE_ROOT OUT`` runs the real console (headless, Textual's ``run_test``) on the recipe,
following its run with its watchdog as an operator's console does, and writes what its ranks
table shows (each rank's state and container) to ``OUT`` four times a second, atomically, with
the time; it says ``watching`` on stderr once the recipe is open, as ``sparktui watch`` does,
and its notices as they come. The soak compares ``OUT`` with Docker and measures how long the
console takes to show the truth after a fault; SIGKILL it as any sparktui process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions

PERIOD_S = 0.25


async def probe(recipes: Path, slug: str, cluster: Path, state: Path, out: Path) -> None:
    options = ConsoleOptions([recipes], cluster, state_root=state, recipe=slug, remember=False,
                             cursor_blink=False)
    app = SparkApp(options)
    async with app.run_test(size=(160, 48)) as pilot:
        main = app.main_screen
        while not main.ready.is_set():
            await pilot.pause(0.1)
        stop = asyncio.Event()  # taken before it says so: a SIGTERM right after ends it cleanly
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print(f"watching {slug} in the console", file=sys.stderr, flush=True)
        last = None  # the last notice said (the list is trimmed from its front)
        while not stop.is_set():
            notes = main.state.notices
            start = next((i + 1 for i in range(len(notes) - 1, -1, -1) if notes[i] is last), 0)
            for note in notes[start:]:
                print(f"{note.level}: {note.text}", file=sys.stderr, flush=True)
            if notes:
                last = notes[-1]
            rows = [{"rank": r, "state": s.state, "container_id": s.container_id}
                    for r, s in sorted(main.state.ranks.items())]
            tmp = out.with_suffix(".tmp")
            tmp.write_text(json.dumps({"at": time.time(), "ranks": rows}))
            os.replace(tmp, out)
            await pilot.pause(PERIOD_S)


def main(argv: list[str]) -> int:
    recipes, slug, cluster, state, out = argv
    asyncio.run(probe(Path(recipes), slug, Path(cluster), Path(state), Path(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
