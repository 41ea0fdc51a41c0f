"""``sparktui watch RECIPE``: follow a running recipe in the foreground and let its restart
watchdog act (``[restart] policy = "group"``); with ``--metrics``, serve sparktui's state and the
engines' series for Prometheus meanwhile. Meant to run unattended, under systemd or tmux:
SIGTERM ends it cleanly; the containers keep running."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from sparktui.backend.exporter import LOOPBACK, StateCollector, listen_address, serve
from sparktui.backend.watchdog import Watchdog
from sparktui.cli.ops import EventPrinter, _opened, _run, err, not_yours
from sparktui.cli.render import plain
from sparktui.core.errors import SparkError
from sparktui.core.restarts import budget_text, cut_short

REFRESH_S = 1.0
"""How often the state ``--metrics`` serves is rebuilt (a Prometheus scrape is 15 s apart)."""


def cmd_watch(args: argparse.Namespace) -> int:
    address = None
    if args.metrics is not None:
        try:
            address = listen_address(args.metrics)
        except ValueError as exc:
            raise SparkError(str(exc)) from None

    async def go() -> int:
        # SIGTERM is taken from the loop's start, not from "watching": a supervisor (or the
        # chaos soak) that stops the watch the moment it said so must find it ending cleanly
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        try:
            return await _watch(args, address, stop)
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        return _run(go())
    except KeyboardInterrupt:
        return 0


async def _watch(args: argparse.Namespace, address: tuple[str, int] | None,
                 stop: asyncio.Event) -> int:
    """Attach, say ``watching``, and follow until ``stop``; a SIGTERM during the attach ends
    the watch right after it."""
    async with _opened(args, attach=True, finish=True) as orch:
        policy = orch.recipe.spec.restart
        if policy.policy == "off" and address is None:
            raise SparkError(f"{orch.recipe.slug} has no restart policy: add [restart] "
                             'policy = "group" to the recipe (max, window, smoke_every optional)'
                             ", or serve its metrics with --metrics PORT")
        if orch.run is None or (not any(info.has_container for info in orch.ranks)
                                and not cut_short(orch.run.events(), policy.policy)):
            raise SparkError(f"nothing of {orch.recipe.slug} is running as yours{not_yours(orch)}: "
                             "start it with sparktui up")
        orch.subscribe(EventPrinter())
        orch.who = "the watch"
        orch.start_following()
        if not orch.following:
            raise SparkError("another sparktui follows this run (a console or another watch); "
                             "its watchdog is the one that acts")
        orch.telemetry().start()  # the nodes, for the status document a status shows
        dog = Watchdog(orch, policy) if policy.policy != "off" else None
        if dog is not None:
            dog.start()
            err.print(plain(f"watching {orch.recipe.slug} (run {orch.run.id}): a failure after "
                            f"ready restarts the whole group, at most {budget_text(policy)}"))
        else:
            err.print(plain(f"watching {orch.recipe.slug} (run {orch.run.id}): no restart "
                            "policy, nothing is restarted"))
        server = None
        refresher: asyncio.Task[None] | None = None
        if address is not None:
            collector = StateCollector(orch)
            collector.refresh()
            try:
                server = serve(collector, *address)
            except OSError as exc:
                raise SparkError(f"--metrics {args.metrics}: cannot listen there: "
                                 f"{exc.strerror or exc}") from None
            refresher = asyncio.create_task(_refresh(collector))
            where = f"{address[0]}:{server.server_port}"
            err.print(plain(f"metrics for Prometheus on http://{where}/metrics"
                            + ("" if address[0] in LOOPBACK else
                               " (beyond loopback, as asked)")))
        try:
            await stop.wait()
        finally:
            if refresher is not None:
                refresher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await refresher
            if server is not None:
                await asyncio.to_thread(server.shutdown)
                server.server_close()
            if dog is not None:
                await dog.close()
        return 0


async def _refresh(collector: StateCollector) -> None:
    """The served snapshot rebuilt every ``REFRESH_S`` on the event loop."""
    while True:
        await asyncio.sleep(REFRESH_S)
        collector.refresh()

