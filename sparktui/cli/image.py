"""``sparktui image sync RECIPE [--from NODE|local]``: the recipe's image, the same build on every
node, copied from one source to every node that lacks it or holds another build, all at once."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from rich.progress import TaskID
from rich.text import Text

from sparktui.backend.events import Event, ImageSyncProgress
from sparktui.backend.imagesync import SyncReport, progress_sentence, short
from sparktui.cli import exits
from sparktui.cli.ops import _opened, _run, err, out
from sparktui.cli.render import plain, transfers
from sparktui.core.units import format_bytes, format_duration

LINE_EVERY_S = 2.0
"""Without a terminal (a log, a test), a progress line per node at most this often."""


class LinePrinter:
    """Progress as plain lines for output that is not a terminal: each node's start, then a
    line per node every few seconds while it sends, then once when its engine loads."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}

    def __call__(self, event: Event) -> None:
        if not isinstance(event, ImageSyncProgress) or event.phase in ("skipped", "done", "failed"):
            return  # the end of each node is in the summary
        now = time.monotonic()
        once = event.phase == "loading" or event.bytes_done == 0  # said once per node
        key = f"{event.node}/{event.phase}/{once}"
        if key in self.last and (once or now - self.last[key] < LINE_EVERY_S):
            return
        self.last[key] = now
        err.print(plain(progress_sentence(event)))


def summary(report: SyncReport) -> list[tuple[bool, Text]]:
    """(ok, line) per node, then the verdict."""
    lines = []
    for r in report.results:
        if r.action == "skipped":
            why = "the source" if r.node == report.source else "already has it"
            lines.append((True, plain(f"= {r.node}: {why} ({short(r.image_id)}), skipped")))
        elif r.action == "copied":
            rate = r.bytes_sent / r.seconds if r.seconds > 0 else 0.0
            lines.append((True, plain(f"✓ {r.node}: copied {format_bytes(r.bytes_sent)} in "
                                     f"{r.seconds:.1f} s ({format_bytes(rate)}/s), now "
                                     f"{short(r.image_id)}")))
        else:
            lines.append((False, plain(f"✗ {r.node}: {r.error}")))
    if report.ok:
        lines.append((True, plain(f"every node has {report.image} {short(report.source_id)}")))
    return lines


def cmd_sync(args: argparse.Namespace) -> int:
    async def go() -> int:
        live = err.is_terminal and not args.json
        progress = transfers(err, phase_width=8, file=False, disable=not live)
        tasks: dict[str, TaskID] = {}

        def bars(event: Event) -> None:
            if not isinstance(event, ImageSyncProgress) or event.phase == "skipped":
                return
            if event.node not in tasks:
                tasks[event.node] = progress.add_task("", total=None, node=event.node, phase="")
            progress.update(tasks[event.node], phase=event.phase, total=event.bytes_total or None,
                            completed=event.bytes_done)

        on_event: Callable[[Event], None] = bars if live else LinePrinter()
        async with _opened(args, on_event) as orch:
            err.print(plain(f"image {orch.image}: from {args.source or 'the head (if it has it)'} "
                           f"to every node of {orch.recipe.slug} that lacks it or holds another build"))
            with progress:
                report = await orch.image_sync(args.source)
        if args.json:
            print(json.dumps(report.to_json(), indent=2))
        else:
            for ok, line in summary(report):
                (out if ok else err).print(line)
            if report.copied:
                out.print(plain(f"{len(report.copied)} node(s) in {format_duration(report.seconds)}"))
        return exits.OK if report.ok else exits.FAILED
    return _run(go())

