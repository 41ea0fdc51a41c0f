"""CLI verbs over the Orchestrator: doctor, up, status, logs, restart, down."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from rich.console import Console

from sparktui.backend.events import Event, NodeChanged, Notice, RankChanged, StagingProgress
from sparktui.backend.orchestrator import LaunchOrder, Orchestrator
from sparktui.backend.owners import held_groups
from sparktui.backend.runtimes.registry import access_problems
from sparktui.backend.smoke import SmokeOutcome, SmokeResult, SmokeSummary
from sparktui.backend.together import together
from sparktui.cli import exits, render
from sparktui.cli.recipes import load_plan
from sparktui.cli.render import STATE_STYLE, plain
from sparktui.config import state_dir
from sparktui.core.controls import visible
from sparktui.core.errors import ConfigError, SparkError
from sparktui.core.restarts import summary as watchdog_summary
from sparktui.core.timing import mark
from sparktui.core.units import format_bytes

if TYPE_CHECKING:  # rich.progress only for the verbs that copy (render.transfers)
    from rich.progress import TaskID

    from sparktui.core.cluster import Cluster
    from sparktui.core.plan import Plan
    from sparktui.core.recipe import Recipe

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


Loaded: TypeAlias = "tuple[Recipe, Cluster, Plan]"
"""A recipe, its cluster and its plan, loaded (and their problems said) by the caller."""


def _make(args: argparse.Namespace, on_event: Callable[[Event], None] | None = None, *,
          loaded: Loaded | None = None) -> Orchestrator:
    if loaded is None:
        recipe, cluster, plan, found = load_plan(args)
        if found:
            err.print(render.problems(found))
    else:
        recipe, cluster, plan = loaded
    # nothing can be tried: exit 2 with the key to fix, before connecting
    access = access_problems(cluster, [cluster.nodes[r.rank] for r in plan.ranks])
    if access:
        raise ConfigError(access)
    order: LaunchOrder = getattr(args, "launch_order", "parallel")
    orch = Orchestrator(recipe, cluster, plan, state_root=state_dir(), on_event=on_event,
                        launch_order=order)
    if isinstance(verb := getattr(args, "command", None), str):
        orch.who = f"sparktui {verb}"  # up --wait, restart: they follow while they wait
    return orch


def _run(coro: Awaitable[int]) -> int:
    async def main() -> int:
        return await coro
    return asyncio.run(main())


class EventPrinter:
    """Progress on stderr: a rank's state when it changes (not its health or uptime), notices,
    staging results, lost nodes. Text from outside is printed as text, never markup."""

    def __init__(self) -> None:
        self.shown: dict[int, tuple[str, str]] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, RankChanged):
            said = (event.rank.state, event.rank.detail)
            if self.shown.get(event.rank.rank) == said:
                return
            self.shown[event.rank.rank] = said
        print_event(event)


def print_event(event: Event) -> None:
    if isinstance(event, RankChanged):
        snap = event.rank
        detail = f" · {snap.detail}" if snap.detail else ""
        err.print(plain(f"rank {snap.rank}: ", (snap.state, STATE_STYLE.get(snap.state, "")), detail))
    elif isinstance(event, Notice):
        print_notice(event)
    elif isinstance(event, StagingProgress) and event.phase in ("done", "failed"):
        if event.phase == "failed":
            err.print(plain("staging ", ("failed", "red"), f": {event.error}"))
        else:
            err.print(plain(f"staging done on {event.node}: {format_bytes(event.bytes_total)} in place"))
    elif isinstance(event, NodeChanged) and event.status != "connected":
        err.print(plain(f"node {event.node}: {event.status} · {event.detail}"))


def print_notice(event: Notice) -> None:
    style = {"error": "red", "warning": "yellow"}.get(event.level, "")
    err.print(plain((event.level, style), ": ", event.text) if style else plain(event.text))


class AttachWarnings:
    """While attaching: what it found wrong (a foreign label, a changed plan) is news. Off once
    attached: a verb that follows subscribes its own ``EventPrinter``."""

    def __init__(self) -> None:
        self.active = True

    def __call__(self, event: Event) -> None:
        if self.active and isinstance(event, Notice) and event.level in ("warning", "error"):
            print_notice(event)


def cmd_doctor(args: argparse.Namespace) -> int:
    async def go() -> int:
        async with _opened(args) as orch:
            findings = await orch.doctor()
        if args.json:
            print(json.dumps([f.to_json() for f in findings], indent=2))
        else:
            out.print(render.doctor_table(f"doctor · {orch.recipe.title} on {orch.cluster.name}",
                                          findings))
        return 1 if any(f.verdict == "failed" for f in findings) else 0
    return _run(go())


def _print_failures(orch: Orchestrator) -> None:
    """Why a waited boot did not come up: the first rank to fail, every rank not ready, every
    failed check (details and patterns are outside text: printed as text, never markup)."""
    failed = orch.failures()
    if failed:
        first = failed[0]
        err.print(plain(("first failure", "red"), f": rank {first.rank} ({first.node.name})"))
    elif not all(r.state == "ready" for r in orch.ranks):
        err.print(plain(("boot timed out", "red"),
                        f": not every rank ready after {orch.plan.boot.timeout_s:g} s"))
    for info in failed + [r for r in orch.ranks if r.state not in ("ready", "failed")]:
        err.print(plain(f"rank {info.rank} ({info.node.name}): {info.state} {info.detail}"))
    for line in render.check_failures(orch.checks.to_json()):
        err.print(line)
    if failed and any(r.has_container for r in orch.ranks):
        err.print(plain(f"the whole group back, same run: sparktui restart {orch.recipe.slug} --group"))


def _verdict(orch: Orchestrator, ready: bool) -> int:
    """The exit code of a waited boot (``up``/``restart --wait``): ``OK`` every rank ready and
    every check passed; ``CHECKS`` ready but a check failed (each named, with the ranks where
    it failed); ``FAILED`` a rank failed or the boot timed out."""
    if not ready:
        _print_failures(orch)
        return exits.FAILED
    checks = orch.checks.to_json()
    out.print(plain(("ready", "green"), f": {len(orch.ranks)} ranks, "
                                        f"{render.checks_count(checks)}"))
    failures = render.check_failures(checks)
    for line in failures:
        err.print(line)
    return exits.CHECKS if failures else exits.OK


def stage_fields(event: StagingProgress) -> dict[str, object]:
    """A node's bar from its agent's report. Phase, file and error are the node's words (an
    agent of another version, or not ours, may send anything): written out like any outside
    text (``render.transfers`` prints them with ``markup=False``)."""
    fields: dict[str, object] = {"phase": visible(event.phase), "file": visible(event.file or "")}
    if event.bytes_total:
        fields["total"] = event.bytes_total
        fields["completed"] = event.bytes_done
    if event.phase == "failed":
        fields["file"] = visible(event.error or "")
    return fields


def cmd_stage(args: argparse.Namespace) -> int:
    """Staging on every node at once, one progress bar per node."""
    sample: int | str | None = None
    if args.sample is not None:
        sample = "all" if args.sample == "all" else int(args.sample)

    async def go() -> int:
        progress = render.transfers(err, phase_width=7, file=True, disable=args.json)
        tasks: dict[str, TaskID] = {}

        def on_event(event: Event) -> None:
            if isinstance(event, StagingProgress):
                key = f"{event.node}/{event.job}"
                if key not in tasks:
                    tasks[key] = progress.add_task("", total=None, node=event.node, phase="",
                                                   file="")
                progress.update(tasks[key], **stage_fields(event))  # type: ignore[arg-type]

        async with _opened(args, on_event) as orch:
            if not orch.plan.staging:
                err.print(plain(f"{orch.recipe.slug} has no [[staging]] jobs"))
                return 0
            with progress:
                results = await orch.stage(verify_only=args.verify_only, sample=sample)
        if args.json:
            print(json.dumps([r.__dict__ for r in results], indent=2, default=str))
        else:
            for r in results:
                if not r.ok:
                    err.print(plain(("✗", "red"), f" {r.error}"))
                    continue
                counts: dict[str, int] = {}
                for f in r.files:
                    counts[f["status"]] = counts.get(f["status"], 0) + 1
                summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                out.print(plain(("✓", "green"), f" {r.node}: {summary} · "
                                f"{format_bytes(r.bytes_written)} written in {r.seconds:.1f} s"))
        return 0 if all(r.ok for r in results) and not (
            args.verify_only and any(f["status"] != "verified" for r in results for f in r.files)) else 1
    return _run(go())


def cmd_up(args: argparse.Namespace) -> int:
    mark("cli: up (interpreter, imports, arguments done)")

    async def go() -> int:
        async with _opened(args, EventPrinter()) as orch:
            mark("cli: plan loaded")
            unreachable = await orch.connect()
            if unreachable:
                for reason in unreachable.values():
                    err.print(plain(("error", "red"), f": {reason}"))
                return exits.FAILED
            await orch.up(image_check=not args.no_image_check, adopt=args.adopt,
                          port_check=not args.no_port_check,
                          memory_check=not args.no_memory_check)
            assert orch.run is not None
            err.print(plain(f"run {orch.run.id} · logs in {orch.run.dir}"))
            if not args.wait:
                return 0 if not any(r.state == "failed" for r in orch.ranks) else 1
            ready = await orch.wait(orch.plan.boot.timeout_s + 5)
            verdict = _verdict(orch, ready)
            mark("cli: verdict printed")
            return verdict
    return _run(go())


@contextlib.asynccontextmanager
async def _opened(args: argparse.Namespace, on_event: Callable[[Event], None] | None = None, *,
                  attach: bool = False, checks: bool = True, finish: bool = False,
                  loaded: Loaded | None = None) -> AsyncIterator[Orchestrator]:
    """The recipe's Orchestrator, closed (connections and all) however the command ends. With
    ``attach``: connected, its containers found and what they wrote meanwhile caught up (and
    the boot checks replayed and fed, unless ``checks`` is False; ``finish``: a restart cut
    short is attached: ``Orchestrator.attach``)."""
    orch = _make(args, on_event, loaded=loaded)
    warnings = AttachWarnings()
    if attach and on_event is None:
        orch.subscribe(warnings)
    try:
        if attach:
            mark("cli: plan loaded")
            unreachable = await orch.connect()
            for reason in unreachable.values():
                err.print(plain(("warning", "yellow"), f": {reason}"))
            mark("attach: connected")
            await orch.attach(follow=False, adopt=getattr(args, "adopt", False), checks=checks,
                              finish=finish)
            mark("attach: containers found")
            await orch.catch_up(checks)
            mark("attach: caught up")
        warnings.active = False
        yield orch
    finally:
        await orch.close()


def live_status(args: argparse.Namespace, loaded: Loaded) -> dict[str, Any]:
    """``status``'s document worked out here (no follower's to show: ``cli.status``): attached,
    every rank probed, the engines seen (never judged), the nodes sampled, the allocation
    asked, all at once, each on its own channels."""
    async def go() -> dict[str, Any]:
        async with _opened(args, attach=True, loaded=loaded) as orch:
            sampled = asyncio.ensure_future(orch.sample_nodes())
            allocated = asyncio.ensure_future(orch.allocation())
            await together(orch.refresh_health(), orch.refresh_engines(), sampled, allocated)
            mark("status: health, engines and nodes")
            return orch.status_document([t.to_json() for t in sampled.result()], allocated.result(),
                                        watchdog=watchdog_summary(orch.run, orch.recipe.spec.restart))
    doc = asyncio.run(go())
    args.leave_at_once = True  # every connection and the loop closed: no teardown needed
    return doc


def cmd_smoke(args: argparse.Namespace) -> int:
    if args.n is None:
        if args.concurrency != 1:
            raise exits.UsageError("--concurrency needs --n (how many requests in all)")
        return _smoke_one(args)
    return _smoke_many(args)


async def _reach_head(orch: Orchestrator) -> None:
    """The nodes connected (the request goes from the head's own node, through its SSH
    connection); the head unreachable: its reason, as an error."""
    unreachable = await orch.connect()
    head = orch.ranks[0].node.name
    if head in unreachable:
        raise SparkError(unreachable[head])


def _smoke_one(args: argparse.Namespace) -> int:
    async def go() -> int:
        async with _opened(args) as orch:
            await _reach_head(orch)
            result = await orch.smoke(max_tokens=args.max_tokens)
        if args.json:
            print(json.dumps(result.__dict__, indent=2))
        else:
            out.print(plain(("smoke ok", "green"), f": {result.sentence()}"))
            out.print(plain((result.text, "dim")))
        return 0
    return _run(go())


def _smoke_many(args: argparse.Namespace) -> int:
    """``--n N``: a line for each request as it ends (``[i/N]``, in the order sent), then the
    summary; exit 1 when any failed. The errors are the engine's words: printed as text."""
    n: int = args.n

    def each(i: int, outcome: SmokeOutcome) -> None:
        if args.json:
            return
        tag = f"[{i + 1}/{n}] "
        if isinstance(outcome, SmokeResult):
            out.print(plain(tag, ("smoke ok", "green"), f": {outcome.sentence()}"))
        else:
            out.print(plain(tag, (str(outcome), "red")))

    async def go() -> int:
        async with _opened(args) as orch:
            await _reach_head(orch)
            start = time.monotonic()
            outcomes = await orch.smokes(n, args.concurrency, args.max_tokens, each)
            summary = SmokeSummary.of(outcomes, time.monotonic() - start)
        if args.json:
            print(json.dumps({
                "requests": [{"ok": True, **o.__dict__} if isinstance(o, SmokeResult)
                             else {"ok": False, "error": str(o)} for o in outcomes],
                "summary": {**summary.__dict__, "concurrency": args.concurrency},
            }, indent=2))
        elif summary.ok:
            out.print(plain(("smoke ok", "green"), f": {summary.sentence()}"))
        else:
            out.print(plain(("smoke failed", "red"), f": {summary.sentence()}"))
        return exits.OK if summary.ok else exits.FAILED
    return _run(go())


def cmd_dump(args: argparse.Namespace) -> int:
    """Every rank's dump, rank by rank (the ranks' words printed as text), and where it is kept."""
    async def go() -> int:
        async with _opened(args, attach=True) as orch:
            result = await orch.dump()
        if args.json:
            print(json.dumps({
                "folder": str(result.folder), "seconds": round(result.seconds, 3),
                "ranks": [{"rank": d.rank, "node": d.node, "how": d.how, "note": d.note,
                           "engine_pid": d.engine_pid, "seconds": round(d.seconds, 3),
                           "stacks": d.stacks, "processes": [p.to_json() for p in d.processes],
                           "last_lines": d.last_lines} for d in result.ranks],
            }, indent=2))
        else:
            for d in result.ranks:
                out.print(plain((f"== rank {d.rank}", "bold"), f" on {d.node}: stacks by {d.how}"
                                f"{' · ' + d.note if d.note else ''}"))
                for line in d.stacks or ["(no stacks)"]:
                    out.print(plain(line))
            err.print(plain(f"dumped {len(result.ranks)} ranks in {result.seconds:.2f} s: "
                            f"{result.folder}"))
        return 0 if all(d.stacks for d in result.ranks) else exits.FAILED
    return _run(go())


def not_yours(orch: Orchestrator) -> str:
    """What a sentence about the operator's own containers adds when another owner's are
    there: whose, since when, and the way to take them over."""
    if not orch.held:
        return ""
    return f" (containers of {'; '.join(held_groups(orch.held))} are there: --adopt takes them over)"


def cmd_restart(args: argparse.Namespace) -> int:
    async def go() -> int:
        async with _opened(args, attach=True) as orch:
            orch.subscribe(EventPrinter())  # after attaching: what it finds is not news
            started = time.monotonic()
            if args.group:
                if not any(info.has_container for info in orch.ranks):
                    raise SparkError("nothing of this recipe has a container of yours"
                                     f"{not_yours(orch)}; start it with up")
                await orch.restart_group()
                err.print(plain(f"every rank replaced in {time.monotonic() - started:.1f} s"))
            else:
                if not 0 <= args.rank < len(orch.ranks):
                    raise exits.UsageError(f"rank {args.rank} does not exist "
                                           f"(0-{len(orch.ranks) - 1})")
                if not orch.ranks[args.rank].has_container:
                    raise SparkError(f"rank {args.rank} has no container of yours{not_yours(orch)}; "
                                     "start the recipe with up")
                await orch.restart(args.rank)
                err.print(plain(f"rank {args.rank} replaced in {time.monotonic() - started:.1f} s"))
            if args.wait:
                return _verdict(orch, await orch.wait(orch.plan.boot.timeout_s + 5))
            return exits.OK
    return _run(go())


def cmd_down(args: argparse.Namespace) -> int:
    async def go() -> int:
        async with _opened(args, attach=True) as orch:
            orch.subscribe(EventPrinter())  # after attaching: what it finds is not news
            await orch.down(adopt=args.adopt)
            return 0
    return _run(go())

