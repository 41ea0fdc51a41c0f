"""``sparktui bundle RECIPE``: one ``.tar.gz`` of a run for an upstream issue.

It holds the plan, the events, every rank's log (or its end), the check verdicts as ``status``
has them, the stall and canary history, the stack dumps and each node's facts at bundle time,
every file masked by the plan's redactor (``core.bundle``). A run whose nodes are down is
bundled all the same: what could not be asked of a node is said in its file."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from sparktui import __version__
from sparktui.backend.bundle import NODE_S, NodeFacts, all_node_facts, run_checks
from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.runtimes.registry import access_problems
from sparktui.cli import exits, render
from sparktui.cli.recipes import load_plan
from sparktui.cli.render import plain
from sparktui.config import state_dir
from sparktui.core.bundle import (
    MB,
    Member,
    bundle_redactor,
    node_member_name,
    run_parts,
    text_member,
    write_bundle,
)
from sparktui.core.checks import BootChecks
from sparktui.core.errors import SparkError
from sparktui.core.names import UnsafeName
from sparktui.core.plan import Plan
from sparktui.core.redact import Redactor
from sparktui.core.restarts import summary as watchdog_summary
from sparktui.core.runstore import Run, RunStore
from sparktui.core.units import format_bytes

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

HISTORY_KINDS = ("stall", "canary")
"""The run events a summary lists as the stall and canary history (``stall``, ``canary`` and
kinds of theirs such as ``canary-failed``)."""
TEXT_WIDTH = 120  # the plan and status views, as a terminal of this width shows them


def cmd_bundle(args: argparse.Namespace) -> int:
    recipe, cluster, plan, found = load_plan(args)
    if found:
        err.print(render.problems(found))
    state = state_dir()
    run = chosen_run(RunStore(state), recipe.slug, args.run)
    output = bundle_path(args.output, run)
    if args.max_log_mb <= 0:
        raise exits.UsageError("--max-log-mb must be a positive number of megabytes")

    async def go() -> int:
        orch = Orchestrator(recipe, cluster, plan, state_root=state)
        try:
            gathered = await gather(orch, run)
        finally:
            await orch.close()
        redactor = bundle_redactor([*plan.redactor().values, *run.redactor.values])
        members = await asyncio.to_thread(assemble, gathered, run, redactor,
                                          int(args.max_log_mb * MB))
        size = await asyncio.to_thread(write_bundle, output, f"sparktui-bundle-{run.id}", members)
        out.print(plain(("bundle", "bold"), f": {output} ({format_bytes(size)}, "
                                            f"{len(members)} files, run {run.id})"))
        for fact in gathered.facts:
            if fact.missing:
                err.print(plain(("warning", "yellow"), f": node {fact.node}: {fact.missing[0]}"))
        return exits.OK
    return asyncio.run(go())


def chosen_run(store: RunStore, slug: str, run_id: str | None) -> Run:
    """``--run ID`` (a run of this recipe), else the recipe's newest run."""
    if run_id is None:
        run = store.latest(slug)
        if run is None:
            raise SparkError(f"{slug} has no run to bundle yet (sparktui up {slug} starts one)")
        return run
    try:
        run = store.open(run_id)
    except UnsafeName as exc:
        raise exits.UsageError(str(exc)) from None
    if run is None or not run_id.startswith(f"{slug}-"):
        raise exits.UsageError(f"no run {run_id!r} of {slug} under {store.root}")
    return run


def bundle_path(given: Path | None, run: Run) -> Path:
    """``--output`` (a file, or a folder to put the bundle in), else in the working folder."""
    name = f"sparktui-bundle-{run.id}.tar.gz"
    if given is None:
        return Path.cwd() / name
    return given / name if given.is_dir() else given


@dataclass
class Gathered:
    """What the cluster and the run said at bundle time, before it is written as files."""

    plan: Plan
    checks: BootChecks
    rows: list[dict[str, object]] | None  # the ranks as ``status`` lists them; None: not attached
    facts: list[NodeFacts]
    watchdog: str | None
    attached: str  # how the ranks' states were had, a sentence for the summary


async def gather(orch: Orchestrator, run: Run) -> Gathered:
    """Connect (each node that answers), attach and catch up when the run is the one the
    containers belong to, then each node's facts and the run's verdicts."""
    nodes = [orch.cluster.nodes[r.rank] for r in orch.plan.ranks]
    access = access_problems(orch.cluster, nodes)
    if access:  # a key file missing, say: nothing can be asked of any node
        why = "; ".join(p.message for p in access)
        unreachable = {n.name: why for n in nodes}
    else:
        try:
            unreachable = await asyncio.wait_for(orch.connect(), NODE_S)
        except asyncio.TimeoutError:
            unreachable = {n.name: f"no answer within {NODE_S:g} s" for n in nodes}
    attached = "not attached: no node answered"
    if len(unreachable) < len(nodes):
        if await orch.attach(follow=False, say_held=False):
            if orch.run is not None and orch.run.id == run.id:
                await orch.catch_up()
                attached = "attached to the run's containers"
            else:
                attached = (f"not attached: the containers on the nodes belong to run "
                            f"{orch.run.id if orch.run else '-'}")
        else:
            attached = "not attached: no container of the recipe is on the nodes"
    checks = await run_checks(orch, run)
    facts = await all_node_facts(orch, unreachable)
    rows = orch.status() if orch.run is not None and orch.run.id == run.id else None
    return Gathered(orch.plan, checks, rows, facts,
                    watchdog_summary(run, orch.recipe.spec.restart), attached)


def _text(renderable: Any) -> str:
    """A Rich view as plain text, as a terminal ``TEXT_WIDTH`` wide without colours shows it."""
    buf = io.StringIO()
    Console(file=buf, width=TEXT_WIDTH, color_system=None, force_terminal=False,
            highlight=False, soft_wrap=False).print(renderable)
    return buf.getvalue()


def history(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's stall and canary events, in order."""
    return [ev for ev in events
            if str(ev.get("kind", "")).split("-", 1)[0] in HISTORY_KINDS]


def assemble(g: Gathered, run: Run, redactor: Redactor, max_log_bytes: int) -> list[Member]:
    """Every member of the bundle, in the order it is written; reads the run's files (call it
    in a thread)."""
    now = time.time()
    parts = run_parts(run, redactor, max_log_bytes)
    events = run.events()
    run_plan = _run_plan_hash(run)
    checks = g.checks.to_json()
    check_lines = [line.plain for line in render.check_failures(checks)]
    status = {
        "recipe": g.plan.recipe_slug, "run": run.id, "plan_hash": run_plan,
        "plan_hash_now": g.plan.plan_hash, "ranks": g.rows, "ranks_from": g.attached,
        "checks": checks, "check_failures": check_lines,
        "checks_count": render.checks_count(checks), "watchdog": g.watchdog,
    }
    nodes_json = [{"node": f.node, "findings": [x.to_json() for x in f.findings],
                   "not_gathered": f.missing} for f in g.facts]
    found = history(events)
    summary = summary_text(g, run, run_plan, check_lines, found)
    members = [
        text_member("summary.txt", summary, redactor, now),
        text_member("plan.txt", _text(render.plan_view(g.plan)), redactor, now),
        text_member("status.json", json.dumps(status, indent=2, default=str) + "\n", redactor, now),
        text_member("history.jsonl", "".join(json.dumps(ev, default=str) + "\n" for ev in found),
                    redactor, now),
        *parts.members,
        text_member("nodes.json", json.dumps(nodes_json, indent=2) + "\n", redactor, now),
        *(text_member(node_member_name(i, f.node), f.text(), redactor, now)
          for i, f in enumerate(g.facts)),
    ]
    readme = readme_text(run, [m.name for m in members], parts.notes, g, max_log_bytes)
    return [text_member("README.txt", readme, redactor, now), *members]


def _run_plan_hash(run: Run) -> str | None:
    try:
        value = json.loads(run.plan_path.read_text()).get("plan_hash")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def summary_text(g: Gathered, run: Run, run_plan: str | None, check_lines: list[str],
                 found: list[dict[str, Any]]) -> str:
    lines = [f"run {run.id} of {g.plan.recipe_name} ({g.plan.recipe_slug}) on cluster "
             f"{g.plan.cluster_name}, {g.plan.world} ranks",
             f"plan hash: {run_plan or '-'} when launched, {g.plan.plan_hash} from the recipe now"
             + ("" if run_plan in (None, g.plan.plan_hash) else " (the recipe changed since)"),
             "", f"ranks ({g.attached}):"]
    if g.rows is None:
        lines.append("  (their states now are unknown; the events and logs tell the run)")
    for row in g.rows or []:
        detail = f" · {row['detail']}" if row.get("detail") else ""
        lines.append(f"  rank {row['rank']} ({row['node']}): {row['state']} exit "
                     f"{row['exit_code']} restarts {row['restarts']}{detail}")
    lines += ["", f"boot checks: {render.checks_count(g.checks.to_json())}"]
    lines += [f"  {line}" for line in check_lines]
    if g.watchdog:
        lines += ["", g.watchdog]
    lines += ["", f"stall and canary history: {len(found)} event(s)"]
    for ev in found:
        rest = {k: v for k, v in ev.items() if k not in ("ts", "kind")}
        lines.append(f"  {ev.get('ts', '-')} {ev.get('kind')}: {json.dumps(rest, default=str)}")
    if not found:
        lines.append("  (none recorded: no rank stalled and no canary ran, or this sparktui "
                     "records neither)")
    lines += ["", "nodes at bundle time:"]
    for fact in g.facts:
        failed = [f for f in fact.findings if f.verdict == "failed"]
        state = "; ".join(fact.missing) if fact.missing else (
            f"{len(failed)} failed check(s)" if failed else "every check passed")
        lines.append(f"  {fact.node}: {state}")
    return "\n".join(lines) + "\n"


def readme_text(run: Run, names: list[str], notes: list[str], g: Gathered,
                max_log_bytes: int) -> str:
    what = {
        "summary.txt": "the run in a page: ranks, check verdicts, stall and canary history, nodes",
        "plan.txt": "the plan as `sparktui plan` shows it (from the recipe at bundle time)",
        "status.json": "ranks and check verdicts as `sparktui status --json` gives them",
        "history.jsonl": "the run's stall and canary events (also in events.jsonl)",
        "plan.json": "the plan the run was launched with",
        "events.jsonl": "every event of the run, one JSON object a line",
        "nodes.json": "doctor's findings per node at bundle time, and what was not gathered",
    }
    lines = [f"sparktui {__version__} bundle of run {run.id} (recipe {g.plan.recipe_slug}, "
             f"cluster {g.plan.cluster_name})", "",
             "Secret values of the recipe (env, secret flags, URL passwords) are masked as "
             "******** in every file, their JSON-escaped and percent-encoded forms too.", "",
             "Files:"]
    for name in ["README.txt", *names]:
        if name in what:
            lines.append(f"  {name}: {what[name]}")
        elif name.startswith("logs/"):
            lines.append(f"  {name}: the rank's log as sparktui captured it (at most "
                         f"{format_bytes(max_log_bytes)})")
        elif name.startswith("dumps/"):
            lines.append(f"  {name}: a stack dump (sparktui dump)")
        elif name.startswith("nodes/"):
            lines.append(f"  {name}: the node at bundle time: doctor, kernel, driver, "
                         "nvidia-smi, memory, Docker")
        elif name != "README.txt":
            lines.append(f"  {name}")
    lines += ["", "Cut or left out:"]
    lines += [f"  {note}" for note in notes] or ["  nothing"]
    for fact in g.facts:
        lines += [f"  nodes: {fact.node}: {why}" for why in fact.missing]
    return "\n".join(lines) + "\n"
