"""``sparktui watch RECIPE``: follow a running recipe in the foreground and let its restart
watchdog act (``[restart] policy = "group"``). Meant to run unattended, under systemd or tmux:
SIGTERM ends it cleanly; the containers keep running."""

from __future__ import annotations

import argparse
import asyncio
import signal

from sparktui.backend.watchdog import Watchdog, budget_text
from sparktui.cli.ops import EventPrinter, _opened, _run, err, not_yours
from sparktui.cli.render import plain
from sparktui.core.errors import SparkError


def cmd_watch(args: argparse.Namespace) -> int:
    async def go() -> int:
        async with _opened(args, attach=True) as orch:
            policy = orch.recipe.spec.restart
            if policy.policy == "off":
                raise SparkError(f"{orch.recipe.slug} has no restart policy: add [restart] "
                                 'policy = "group" to the recipe (max, window, smoke_every optional)')
            if not any(info.has_container for info in orch.ranks) or orch.run is None:
                raise SparkError(f"nothing of {orch.recipe.slug} is running as yours{not_yours(orch)}: "
                                 "start it with sparktui up")
            orch.subscribe(EventPrinter())
            orch.start_following()
            if not orch.following:
                raise SparkError("another sparktui follows this run (a console or another watch); "
                                 "its watchdog is the one that acts")
            dog = Watchdog(orch, policy)
            dog.start()
            err.print(plain(f"watching {orch.recipe.slug} (run {orch.run.id}): a failure after ready "
                           f"restarts the whole group, at most {budget_text(policy)}"))
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            try:
                await stop.wait()
            finally:
                loop.remove_signal_handler(signal.SIGTERM)
                await dog.close()
            return 0
    try:
        return _run(go())
    except KeyboardInterrupt:
        return 0

