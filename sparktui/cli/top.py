"""``sparktui top RECIPE``: the engines' own numbers as a table that refreshes (the console's
pulse view, for a terminal without the console or a script with ``--once``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sparktui.backend.metrics import MetricsScraper
from sparktui.cli.ops import _opened, _run, not_yours, out
from sparktui.cli.render import _bare_table, plain
from sparktui.core.controls import visible
from sparktui.core.errors import SparkError
from sparktui.core.metrics import LABELS, PulseKey, level, shown
from sparktui.core.units import format_duration

LEVEL_STYLE = {"ok": "green", "warn": "yellow", "bad": "red", "none": ""}


def pulse_table(title: str, scraper: MetricsScraper, nodes: dict[int, str],
                now: float | None = None) -> Table:
    """A column per rank that serves metrics (and the group's), a row per series the engine
    has, coloured by its thresholds, and a last row saying how old each reading is (stale:
    why). Series down, ranks across: one API rank is the usual case, and ten series across
    would not fit 80 columns."""
    now = time.monotonic() if now is None else now
    keys = list(dict.fromkeys(s.key for s in scraper.spec.series))  # p50 and p95: one family
    table = _bare_table(title)
    table.add_column("", no_wrap=True)
    pulses = [scraper.pulses.get(rank) for rank in scraper.ranks]
    columns: list[dict[PulseKey, float | None]] = [p.values() if p is not None else {}
                                                   for p in pulses]
    for rank in scraper.ranks:
        table.add_column(Text(visible(f"r{rank} {nodes[rank]}")), justify="right", no_wrap=True)
    if len(scraper.ranks) > 1:
        table.add_column(Text("group", style="bold"), justify="right", no_wrap=True)
        columns.append(scraper.group())
    for key in keys:
        table.add_row(LABELS[key], *(Text(shown(key, c.get(key)),
                                          style=LEVEL_STYLE[level(key, c.get(key))])
                                     for c in columns))
    ages = []
    for pulse in pulses:
        if pulse is None:
            ages.append(Text("not yet", style="dim"))
        elif pulse.stale is not None:
            ages.append(Text(visible(f"stale: {pulse.stale}"), style="yellow"))
        else:
            ages.append(Text(f"{format_duration(now - (pulse.last_ok or now))} ago"))
    table.add_row("scraped", *ages, *([Text("")] if len(scraper.ranks) > 1 else []))
    return table


def pulse_json(scraper: MetricsScraper, nodes: dict[int, str]) -> dict[str, object]:
    ranks = []
    for rank in scraper.ranks:
        pulse = scraper.pulses.get(rank)
        ranks.append({"rank": rank, "node": nodes[rank],
                      "values": dict(pulse.values()) if pulse is not None else {},
                      "stale": pulse.stale if pulse is not None else "not scraped"})
    return {"ranks": ranks, "group": dict(scraper.group())}


def cmd_top(args: argparse.Namespace) -> int:
    async def go() -> int:
        async with _opened(args, attach=True) as orch:
            scraper = orch.metrics
            if scraper.interval is None:
                raise SparkError(f"{orch.recipe.slug}: [metrics] is off in the recipe")
            if not scraper.ranks:
                raise SparkError(f"{orch.recipe.slug}: no rank of its engine serves metrics")
            if not any(info.has_container for info in orch.ranks):
                raise SparkError(f"nothing of {orch.recipe.slug} is running as yours"
                                 f"{not_yours(orch)}: start it with sparktui up")
            every = args.every if args.every is not None else scraper.interval
            nodes = {i.rank: i.node.name for i in orch.ranks}
            title = f"{orch.recipe.title} · engine metrics"
            await scraper.scrape_all()
            if args.once:  # rates and percentiles need two readings: the second after --over
                await asyncio.sleep(args.over)
                await scraper.scrape_all()
                if args.json:
                    print(json.dumps(pulse_json(scraper, nodes), indent=2))
                else:
                    out.print(pulse_table(title, scraper, nodes))
                stale = [p for p in scraper.pulses.values() if p.stale is not None]
                return 1 if len(stale) == len(scraper.ranks) else 0
            with Live(pulse_table(title, scraper, nodes), console=out, auto_refresh=False) as live:
                while True:
                    await asyncio.sleep(every)
                    await scraper.scrape_all()
                    live.update(Group(pulse_table(title, scraper, nodes),
                                      plain(("Ctrl-C", "bold"), " ends it")), refresh=True)
    try:
        return _run(go())
    except KeyboardInterrupt:
        return 0
