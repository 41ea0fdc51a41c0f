"""``sparktui status``: every rank's state, container, checks and health, the nodes, the run.

Shown from the status document of the console or ``watch`` that follows the run, when there is
one and it may be (``core.statusdoc``): then nothing of the backend is imported and no node is
asked (0.2 s, where working it out takes 0.7: issue 30). Otherwise worked out here, through
the Orchestrator (``cli.ops.live_status``, imported only then). Either way the same document
is printed, as JSON or as text (``cli.render.status_lines``).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console

from sparktui.cli import render
from sparktui.cli.recipes import load_plan
from sparktui.config import state_dir
from sparktui.core.names import is_safe
from sparktui.core.runstore import RunStore
from sparktui.core.statusdoc import followed_status
from sparktui.core.timing import mark

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def cmd_status(args: argparse.Namespace) -> int:
    mark("cli: status (interpreter, imports, arguments done)")
    recipe, cluster, plan, found = load_plan(args)
    if found:
        err.print(render.problems(found))
    mark("cli: plan loaded")
    doc = _followed(recipe.slug, plan.plan_hash, cluster.name)
    if doc is None:
        from sparktui.cli.ops import live_status

        doc = live_status(args, (recipe, cluster, plan))
    else:
        mark("status: the follower's document read")
        args.leave_at_once = True  # nothing opened: no teardown needed
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        for part in render.status_lines(doc, time.time()):
            out.print(part)
    return 0


def _followed(slug: str, plan_hash: str, cluster: str) -> dict[str, Any] | None:
    """The document of the process following the recipe's latest run, if it may be shown."""
    if not is_safe(slug):
        return None
    try:
        run = RunStore(state_dir()).latest(slug)
    except OSError:
        return None
    if run is None:
        return None
    return followed_status(run, plan_hash=plan_hash, cluster=cluster, now=time.time())
