"""The Orchestrator: the one API the CLI and the TUI drive.

It keeps the lifecycle (connect, up, down, restart, attach, doctor, stage, smoke) and owns the
cluster's runtime (``runtimes.registry``: built for the cluster's kind), asking it for what it
can do (``runtimes.base``: logs, a node's shell, probes, staging, images, telemetry) rather than
which kind it is. The jobs that run alongside are rooms of their own, sharing
one ``Board``: the log follower (``follower``), health probes (``health``) and the boot budget
(``boot``). Containers outlive it: quitting never stops them, and the next Orchestrator
reattaches by label.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from pathlib import Path
from typing import Any, Literal

from sparktui.backend import threads
from sparktui.backend.board import Board
from sparktui.backend.boot import BootWatch
from sparktui.backend.canary import Canary
from sparktui.backend.doctor import Finding, doctor
from sparktui.backend.dumps import DumpResult, dump_ranks
from sparktui.backend.enginewatch import EngineWatch
from sparktui.backend.events import AllocationChanged, Event, NodeChanged, NodeTelemetry, RunStarted
from sparktui.backend.follower import LogFollower
from sparktui.backend.health import PROBE_HOST, HealthProber
from sparktui.backend.history import GrepProgress, ScannerPool, grep_run, scanners_for
from sparktui.backend.imagesync import (
    ImageCheck,
    ImageMismatch,
    ImageSyncError,
    SyncReport,
    check_images,
)
from sparktui.backend.kmsg import KernelVerdict
from sparktui.backend.memfit import check_fit
from sparktui.backend.memguard import MemoryWatch
from sparktui.backend.memwait import RestartWait, read_baseline, record_baseline
from sparktui.backend.metrics import MetricsScraper
from sparktui.backend.nodeshell import NodeError, NodeShell
from sparktui.backend.owners import (
    Held,
    HeldElsewhere,
    NameClash,
    Names,
    held_detail,
    held_groups,
    held_notice,
    mine,
)
from sparktui.backend.runtime import Containers, ContainerState, ImageMissing, RuntimeLost
from sparktui.backend.runtimes.base import (
    Allocation,
    Images,
    NodeExec,
    NodeProbe,
    Processes,
    RestartOne,
    Scheduled,
    Stage,
    Telemetry,
)
from sparktui.backend.runtimes.registry import runtime_for
from sparktui.backend.smoke import SmokeOutcome, SmokeResult, smoke, smoke_many
from sparktui.backend.staging import Stager, StagingResult
from sparktui.backend.statusdoc import StatusKeeper
from sparktui.backend.telemetry import Sampler
from sparktui.backend.together import together
from sparktui.core.canary import CanaryState, canary_state
from sparktui.core.checks import BootChecks, Check
from sparktui.core.cluster import Cluster, Node
from sparktui.core.dockerview import short_id
from sparktui.core.errors import SparkError, sentence
from sparktui.core.linefilter import LineFilter
from sparktui.core.memfit import NodeFit, WontFit
from sparktui.core.memguard import restore_causes
from sparktui.core.memwait import Baseline, baselines_of, open_wait
from sparktui.core.names import UnsafeName, is_safe
from sparktui.core.ownership import Adoptions, default_owner, owner_name, owner_of
from sparktui.core.plan import LABEL_CLUSTER, LABEL_PLAN, LABEL_RANK, LABEL_RECIPE, Plan, RankPlan
from sparktui.core.ports import BusyPort, PortsInUse
from sparktui.core.ranks import RUNNING, Cause, CauseCode, RankInfo, first_failures, restore_said
from sparktui.core.recipe import Recipe
from sparktui.core.restarts import cut_short
from sparktui.core.restarts import summary as watchdog_summary
from sparktui.core.runstore import MARKER, NEXT_CONTAINER, Run, RunStore, ts_epoch, utc_now
from sparktui.core.stall import Stall
from sparktui.core.telemetry import DEFAULT_INTERVAL, LOW_MEMORY
from sparktui.core.timing import mark

LABEL_RUN = "sparktui.run"
PORT_PROBE_S = 2.0
"""How long ``up`` waits for a port's answer on a node: a firewall that drops the connection
leaves it unanswered, and a port nobody answers on is taken as free."""
LaunchOrder = Literal["workers-first", "head-first", "parallel"]
"""How ``up`` starts the ranks: all at once by default (one container start per node, in parallel:
starting the head after the workers cost a second container start, about 0.3 s of a 1.1 s launch
on the test cluster, docs/benchmarks.md); the head waits for its workers' rendezvous either way.
A group restart starts the workers first, then the head."""
ALLOCATION_EVERY_S = 10.0
"""How often a followed run's scheduler is asked for its allocation (Slurm: its time left)."""
ALLOCATION_BOOTING_S = 1.0
"""How often while a rank is not ready: a group restarted in a new job is shown in it."""


class Orchestrator:
    def __init__(self, recipe: Recipe, cluster: Cluster, plan: Plan, *, state_root: Path,
                 on_event: Callable[[Event], None] | None = None,
                 launch_order: LaunchOrder = "parallel",
                 health_interval: float | None = None) -> None:
        """``health_interval``: seconds between probes of a ready rank when the cluster file
        sets none (the console's config.toml); else the cluster's, else 10 s."""
        self.recipe = recipe
        self.cluster = cluster
        self.plan = plan
        self.store = RunStore(state_root)
        self.launch_order = launch_order
        self._listeners: list[Callable[[Event], None]] = [on_event] if on_event else []
        self.keeper: StatusKeeper | None = None
        """The status document kept while following (``backend.statusdoc``)."""
        self.nodes = [cluster.nodes[r.rank] for r in plan.ranks]
        self.runtime = runtime_for(cluster, self.nodes, state_root)
        self.runtimes: dict[str, Containers] = {n.name: self.runtime.containers(n.name)
                                                for n in self.nodes}
        rt = self.runtime
        self.shells: dict[str, NodeShell] = (
            {n.name: rt.shell(n.name) for n in self.nodes} if isinstance(rt, NodeExec) else {})
        openers = {n.name: rt.opener(n.name) for n in self.nodes} if isinstance(rt, NodeProbe) else {}
        self.board = Board(plan, self.nodes, self.emit)
        self.follower = LogFollower(self.board, self.runtimes, rt.connect)
        self.verdict = KernelVerdict(self.board, self.shells)  # a failed rank's kernel messages
        self.follower.on_exit = self.verdict.rank_exited
        self.health = HealthProber(
            self.board, openers,
            interval=cluster.health_interval or health_interval or cluster.probe_interval)
        self.boot = BootWatch(self.board)
        head = self.nodes[0].name
        self.canary = Canary(self.board, plan.liveness, openers.get(head),
                             rt.shown_host(head) if isinstance(rt, NodeProbe) else head
                             ) if plan.liveness is not None else None
        """The ``[liveness]`` canary (None without the table): sent while following."""
        self.engines = (EngineWatch(self.board, rt, interval=self.health.interval)
                        if isinstance(rt, Processes) else None)
        self.memory = MemoryWatch(self.board, self.shells, self.runtimes, self.emit)
        self.metrics = MetricsScraper(self.board, openers, plan.metrics.interval_s)
        """The engines' own numbers (``[metrics]``): scraped while following."""
        """The memory guard (``[memory]`` floor and stop_at): run while following."""
        self.following = False
        self.allocation_said: str | None = None
        """The allocation's last sentence, while following (``_allocation_loop``)."""
        self.allocation_asked = not isinstance(self.runtime, Scheduled)
        """Whether ``allocation_said`` is the scheduler's answer (always, with none to ask)."""
        self._watchdog_said: tuple[int, str | None] | None = None  # (events.jsonl size, line)
        self.who = "another sparktui"
        """Who this process is, as a ``status`` beside it names it (``the console``, ``the
        watch``): the status document says it."""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._closed = False
        self._sampler: Sampler | None = None
        self.owner = cluster.owner or default_owner()
        self.adoptions = Adoptions(state_root)
        self.scanners = ScannerPool()  # the console's grep over a run's files, started ahead
        self._adopted: set[str] = set()  # container ids this owner took over (adopted.json)
        self.baselines: dict[str, Baseline] = {}
        """Each node's memory before the launch (``memory-baseline``): what a restart waits for."""
        self.held: list[Held] = []
        """Other owners' containers of this recipe, as the last attach found them: shown, never
        touched without ``adopt``."""

    # -- what listeners and callers read -----------------------------------------------------
    @property
    def ranks(self) -> list[RankInfo]:
        return self.board.ranks

    @property
    def checks(self) -> BootChecks:
        return self.board.checks

    @property
    def run(self) -> Run | None:
        return self.board.run

    def subscribe(self, listener: Callable[[Event], None]) -> None:
        self._listeners.append(listener)

    def emit(self, event: Event) -> None:
        for listener in self._listeners:
            listener(event)
        if self.keeper is not None:
            self.keeper.touch(event)

    def failures(self) -> list[RankInfo]:
        """Failed ranks, the first to fail first."""
        return first_failures(self.ranks)

    def status(self) -> list[dict[str, object]]:
        now = time.time()
        return [{
            "rank": i.rank, "node": i.node.name, "state": i.state,
            # one down removed is no container, as a status that attaches afterwards finds
            "container_id": i.container_id if i.has_container else None,
            "exit_code": i.exit_code, "restarts": i.restarts,
            "checks": self.checks.rank_summary(i.rank), "health": i.health, "detail": i.detail,
            "cause": i.cause.code if i.cause is not None else None,
            "silent_s": None if (quiet := i.silent_s(now)) is None else round(quiet, 1),
            "last_line": i.last_line,
            "engine": i.engine.to_json() if i.engine is not None else None,
        } for i in self.ranks]

    def status_document(self, nodes: list[dict[str, object]], allocation: str | None, *,
                        watchdog: str | None, follower: str | None = None) -> dict[str, Any]:
        """What ``status`` shows of the recipe now, as one document (``backend.statusdoc``).
        ``nodes``: each node's latest telemetry (``NodeTelemetry.to_json``); ``watchdog``: the
        watchdog's line (``core.restarts.summary``); ``follower``: who keeps the document
        (``the console``, ``the watch``), None when ``status`` worked it out itself."""
        run = self.run
        canary = self.canary_state()
        stall = self.stall()
        return {
            "recipe": self.recipe.slug, "title": self.recipe.title, "cluster": self.cluster.name,
            "run": run.id if run else None, "plan_hash": self.plan.plan_hash,
            "ranks": self.status(), "checks": self.checks.to_json(), "watchdog": watchdog,
            "canary": canary.to_json() if canary is not None else None,
            "owner": self.owner, "held": [h.to_json() for h in self.held],
            "held_phrases": held_groups(self.held), "allocation": allocation,
            "stall": stall.to_json() if stall is not None else None, "nodes": nodes,
            "restart_hint": bool(self.failures()) and any(r.has_container for r in self.ranks),
            "source": {"follower": follower, "pid": os.getpid(), "at": time.time()},
        }

    def _kept_document(self) -> tuple[Path, str] | None:
        """The document the follower keeps (``StatusKeeper``), secrets masked as the run's files
        are; none while it would send a status asking the nodes itself anyway: a follower that
        samples no node (``up --wait``, ``logs -f``), a node not sampled yet, a scheduler not
        asked yet. The watchdog's line reads the run's events again only when they grew."""
        run, latest = self.run, self.sampled()
        names = self.node_names()
        if run is None or latest is None or any(n not in latest for n in names) \
                or not self.allocation_asked:
            return None
        try:
            size = (run.dir / "events.jsonl").stat().st_size
        except OSError:
            size = -1
        if self._watchdog_said is None or self._watchdog_said[0] != size:
            self._watchdog_said = (size, watchdog_summary(run, self.recipe.spec.restart))
        doc = self.status_document([latest[n].to_json() for n in names], self.allocation_said,
                                   watchdog=self._watchdog_said[1], follower=self.who)
        return run.dir, json.dumps(self.board.redactor.data(doc), separators=(",", ":"))

    def stall(self) -> Stall | None:
        """The booting rank that went quiet (``core.stall``), as the boot watch sees it now."""
        return self.board.stalled()

    def canary_state(self) -> CanaryState | None:
        """The canary's last completion and whether the group is wedged: what this process sent,
        else what the run's events say (a ``status`` beside a ``watch``); None without
        ``[liveness]``."""
        if self.plan.liveness is None:
            return None
        if self.canary is not None and self.canary.last is not None:
            return CanaryState(self.canary.last, any(r.state == "wedged" for r in self.ranks))
        return canary_state(self.run.events()) if self.run is not None else CanaryState(None, False)

    def _start_run(self, run: Run, fresh: bool) -> None:
        run.redactor = self.board.redactor  # events.jsonl never holds a secret value
        self.board.run = run
        self.emit(RunStarted(run, fresh))

    # -- nodes -----------------------------------------------------------------------------
    async def connect(self) -> dict[str, str]:
        """Connect to every node at once; returns the nodes that failed, with the reason. Each
        node's container engine client is opened as soon as its connection is, while the other
        nodes still connect."""
        threads.enough_for(len(self.nodes))  # every node's blocking calls at once

        async def one(node: Node) -> tuple[str, str | None]:
            mark(f"ssh {node.name}: connecting")
            try:
                await self.runtime.connect(node.name)
                mark(f"ssh {node.name}: connected")
            except NodeError as exc:
                self.emit(NodeChanged(node.name, "unreachable", exc.reason))
                return node.name, str(exc)
            self.emit(NodeChanged(node.name, "connected"))
            await self.runtimes[node.name].open()
            return node.name, None
        results = await together(*(one(n) for n in self.nodes))
        return {name: err for name, err in results if err}

    def labels(self) -> dict[str, str]:
        return {LABEL_RECIPE: self.recipe.slug, LABEL_CLUSTER: self.cluster.name}

    async def _find(self, info: RankInfo) -> tuple[ContainerState | None, list[ContainerState]]:
        """The rank's container of this operator (own label or adopted; running first, then
        the newest), and those of other owners."""
        rt = self.runtimes[info.node.name]
        found = await rt.find({**self.labels(), LABEL_RANK: str(info.rank)})
        found.sort(key=lambda c: (c.running, c.started_at or ""), reverse=True)
        own = [c for c in found if mine(c, self.owner, self._adopted)]
        return (own[0] if own else None), [c for c in found if c not in own]

    async def doctor(self) -> list[Finding]:
        """Preflight every node at once: SSH, Docker, image, HF snapshot, disk, port, NICs, GPUs,
        memory fit."""
        return await doctor(self.plan, self.nodes, self.runtime, self.check_memory)

    # -- attach ----------------------------------------------------------------------------
    async def attach(self, follow: bool = True, adopt: bool = False,
                     say_held: bool = True, checks: bool = True, finish: bool = False) -> bool:
        """Find this operator's containers of this recipe on every node; True when any exist.
        Other owners' containers are listed in ``held`` (and said in a notice and in their
        ranks' details), not attached; with ``adopt`` a rank that has none of the operator's own
        takes another owner's, and it counts as the operator's from then on. Reattaching never
        relaunches anything. ``say_held``: False when the caller says it itself (``up``).
        ``checks``: False for a caller that shows lines, no verdict (``logs``): the boot checks
        are not replayed nor a failed rank's kernel asked; the next attach that shows them
        replays the run's files, which hold every line (a check's verdict is the same whenever
        its lines are read). ``finish``: a caller whose watchdog finishes a group restart cut
        short (the watch) takes the recipe's latest run even with no container left, when its
        events say the restart was cut short rather than the run taken down
        (``core.restarts.cut_short``)."""
        self._adopted = self.adoptions.adopted_by(self.owner)
        states = await asyncio.gather(*(self._find(info) for info in self.ranks),
                                      return_exceptions=True)
        mark("attach: containers listed")
        run_ids: set[str] = set()
        found = False
        self.held = []
        for info, res in zip(self.ranks, states, strict=True):
            if isinstance(res, BaseException):
                info.cause = Cause("unreachable", text=str(res))
                self.board.notice("error", f"rank {info.rank} ({info.node.name}): {res}")
                continue
            st, others = res
            if st is None and others and adopt:
                st, others = others[0], others[1:]
                self.adoptions.add(st.id, owner_of(st.labels), self.owner)
                self._adopted.add(st.id)
                self.board.notice("info", f"rank {info.rank} ({info.node.name}): took over "
                                          f"container {st.name} of {owner_name(owner_of(st.labels))}")
            held = [Held(info.rank, info.node.name, c) for c in others]
            self.held += held
            if st is None:
                if held and info.state == "pending":
                    info.cause = Cause("held", text=held_detail(held[0]))
                    self.board.announce(info)
                continue
            found = True
            if st.queued is not None:  # its scheduler has not started it yet: nothing to follow
                info.state, info.cause = "queued", Cause("queued", text=st.queued)
                continue
            info.observe(st.id, st.running, st.exit_code, st.lost, st.unstarted)
            if st.running:
                info.started = _monotonic_at(st.started_at)
            if LABEL_RUN in st.labels:
                label = st.labels[LABEL_RUN]
                if is_safe(label):
                    run_ids.add(label)
                else:  # a label anyone on the node can set: never a path
                    self.board.notice(
                        "warning", f"container {st.name or st.id[:12]} on {info.node.name} has "
                        f"label {LABEL_RUN}={label[:80]!r}, which is no run id: ignored")
            if st.labels.get(LABEL_PLAN) not in (None, self.plan.plan_hash):
                self.board.notice(
                    "warning", f"rank {info.rank} runs plan {st.labels.get(LABEL_PLAN)}, but the "
                    f"recipe on disk plans {self.plan.plan_hash}: the recipe changed since launch "
                    "(restart the ranks to apply it)")
        if self.held and say_held:
            self.board.notice("warning", held_notice(self.recipe.slug, self.cluster.name,
                                                     self.owner, self.held))
        run = None
        if not found:
            latest = self.store.latest(self.recipe.slug)
            if latest is None:
                return False
            events = await asyncio.to_thread(latest.events)
            if not (finish and cut_short(events, self.recipe.spec.restart.policy)):
                self._restore_wait(events)
                return False
            run = latest
        run_id = sorted(run_ids)[-1] if run_ids else None
        if run_id:
            try:
                run = self.store.open(run_id)
            except UnsafeName as exc:  # a safe name whose folder is a link leading elsewhere
                self.board.notice("warning", f"{exc}: ignored")
        run = run or self.store.latest(self.recipe.slug)
        if run is None:
            run = self.store.create(self.recipe.slug)
            run.write_plan(self.plan)
        self._start_run(run, fresh=False)
        events = await asyncio.to_thread(run.events)  # read once, off the loop: a long run's is big
        self._restore_counts(events)
        restore_said(self.ranks, events)  # what the follower that saw a rank fail said of it
        restore_causes(self.ranks, events)  # a rank the memory guard stopped says so
        self._restore_wait(events)
        mark("attach: events read")
        if checks:
            await self.follower.replay_checks(run, events)
            mark("attach: checks replayed")
            await self.verdict.judge_attached(events)
        self.board.boot_started = time.monotonic()
        for info in self.ranks:
            self.board.announce(info)
        if follow:
            self.start_following()
        return True

    def _restore_counts(self, events: list[dict[str, Any]]) -> None:
        """Each rank's restarts, counted from the run's events (never from its log lines)."""
        for ev in events:
            rank = ev.get("rank")
            if ev.get("kind") == "restart" and isinstance(rank, int) and 0 <= rank < len(self.ranks):
                self.ranks[rank].restarts += 1

    def _restore_wait(self, events: list[dict[str, Any]]) -> None:
        """The launch's memory baseline from the run's events, and a restart's wait another
        process is in now: its ranks shown ``restarting`` with the wait's figures."""
        self.baselines = baselines_of(events)
        for rank, text in open_wait(events, time.time()).items():
            if 0 <= rank < len(self.ranks) and not self.ranks[rank].has_container:
                info = self.ranks[rank]
                info.state, info.cause = "restarting", Cause("memory_wait", text=text)

    async def add_check(self, pattern: str, ranks: str | list[int]) -> tuple[Check, BootChecks]:
        """A must-show check added by the operator: evaluated on everything the run captured,
        then live. Returns it and every check as it stands; ValueError on a bad pattern."""
        return await self.follower.add_check(pattern, ranks)

    # -- telemetry, smoke, staging -------------------------------------------------------------
    def telemetry(self, interval: float = DEFAULT_INTERVAL, low_memory: int = LOW_MEMORY) -> Sampler:
        """The runtime's node sampler (start() it to keep sampling); a runtime without
        ``Telemetry`` has one that samples no node."""
        if self._sampler is None:
            if isinstance(self.runtime, Telemetry):
                self._sampler = self.runtime.sampler(self.plan, self.nodes, self.emit,
                                                     interval=interval, low_memory=low_memory)
            else:
                self._sampler = Sampler(self.plan, [], {}, self.emit, interval=interval,
                                        low_memory=low_memory)
        return self._sampler

    def sampled(self) -> dict[str, NodeTelemetry] | None:
        """Each node's latest telemetry of the running sampler; None when none runs."""
        sampler = self._sampler
        return dict(sampler.latest) if sampler is not None and sampler.running else None

    def node_names(self) -> list[str]:
        """The nodes sampled (``telemetry``), each once, in rank order."""
        nodes = self._sampler.nodes if self._sampler is not None else self.nodes
        return list(dict.fromkeys(n.name for n in nodes))

    async def sample_nodes(self) -> list[NodeTelemetry]:
        sampler = self.telemetry()
        return list(await together(*(sampler.sample(n) for n in sampler.nodes)))

    async def smoke(self, max_tokens: int = 64) -> SmokeResult:
        """One streamed chat completion to the head."""
        head = self.ranks[0].node
        if not isinstance(self.runtime, NodeProbe):
            raise SparkError(f"the {self.cluster.kind} runtime opens no connection on a node: "
                             "nothing can reach the head")
        return await smoke(PROBE_HOST, self.plan.ranks[0].port, self.plan.served_model_name,
                           max_tokens=max_tokens, opener=self.runtime.opener(head.name),
                           shown_host=self.runtime.shown_host(head.name))

    async def smokes(self, n: int, concurrency: int = 1, max_tokens: int = 64,
                     on_each: Callable[[int, SmokeOutcome], None] | None = None) -> list[SmokeOutcome]:
        """``n`` of ``smoke``'s requests, ``concurrency`` at once; each one's result or error,
        in the order sent (``on_each`` as each ends)."""
        return await smoke_many(lambda: self.smoke(max_tokens), n, concurrency, on_each)

    async def refresh_health(self) -> None:
        """Probe every rank once (a status without a live follower)."""
        await self.health.probe_all()

    async def refresh_engines(self) -> None:
        """Every running rank's engine process looked at once (a status without a live
        follower: shown, never judged gone, as no earlier look saw it)."""
        if self.engines is not None:
            await self.engines.sample_all(judge=False)

    async def dump(self) -> DumpResult:
        """Every rank's stacks, last lines and processes, all ranks at once (``dumps``), saved
        in the run's folder; a runtime without ``Processes`` is said in a sentence."""
        if not isinstance(self.runtime, Processes):
            raise SparkError(f"the {self.cluster.kind} runtime cannot look inside a rank's "
                             "container: no stacks nor process list to dump")
        if self.run is None:
            raise SparkError("no run of this recipe to dump; start it with up")
        async def refresh() -> None:  # a follower of ours writes the run's files as lines come
            if not self.following:
                await self.catch_up()
        return await dump_ranks(self.board, self.runtime, self.run, refresh)

    async def stage(self, verify_only: bool = False,
                    sample: int | str | None = None) -> list[StagingResult]:
        """Run the recipe's staging jobs on every node at once (nothing to do: empty list)."""
        if not self.plan.staging:
            return []
        if not isinstance(self.runtime, Stage):
            raise SparkError(f"the {self.cluster.kind} runtime cannot run the staging agent")
        stager = Stager(self.plan, self.runtime, self.emit)
        results = await stager.run(verify_only=verify_only, sample=sample)
        if self.run is not None:
            for r in results:
                self.run.event("staging", node=r.node, job=r.job, ok=r.ok, error=r.error,
                               bytes_written=r.bytes_written, seconds=r.seconds)
        return results

    # -- the image --------------------------------------------------------------------------
    @property
    def can_sync_images(self) -> bool:
        """Whether the runtime runs images, so that ``image_sync`` has something to copy."""
        return isinstance(self.runtime, Images)

    @property
    def image(self) -> str:
        """The recipe's image (every rank runs the same one)."""
        return self.plan.ranks[0].container.image

    async def check_images(self) -> ImageCheck:
        """The image's id on every node at once, judged against the head's (or, when the head
        lacks it, the first node's that has it): what ``up`` checks before it starts anything."""
        if not isinstance(self.runtime, Images):
            raise ImageSyncError(f"the {self.cluster.kind} runtime runs no images: nothing to check")
        return await check_images(self.image, [n.name for n in self.nodes], self.runtime)

    async def image_sync(self, source: str | None = None) -> SyncReport:
        """Copy the image to every node that lacks it or holds another build, all at once, from
        ``source`` (a node of the cluster, or ``local``; default: the head if it has it, else the
        first node that has it, else this machine's engine); then check every node's id. Nodes
        that already match are skipped; nothing is deleted. Progress: ``ImageSyncProgress``."""
        if not isinstance(self.runtime, Images):
            runs = self.runtime.kind.shown or "no images"
            raise ImageSyncError(f"the {self.cluster.name} cluster runs {runs}, not images: "
                                 "nothing to copy")
        return await self.runtime.sync_image(self.image, [n.name for n in self.nodes], self.emit,
                                             source)

    # -- ports -----------------------------------------------------------------------------
    async def check_ports(self) -> list[BusyPort]:
        """Every serving rank's API port that a server on its node already answers on, at the
        node's loopback or its fabric address: a connection from the node itself, a direct
        channel over the SSH connection held, every port at once. 0.4 ms on the test cluster,
        where reading the node's ``/proc/net/tcp`` took a command on the node (a session:
        90-150 ms each, 450 ms for four at once)."""
        fabric = {n.name: n.fabric_ip for n in self.nodes}
        runtime = self.runtime
        if not isinstance(runtime, NodeProbe):
            return []

        async def taken(r: RankPlan) -> bool:
            for host in dict.fromkeys((PROBE_HOST, fabric[r.node])):
                try:
                    _reader, writer = await asyncio.wait_for(
                        runtime.opener(r.node)(host, r.port), PORT_PROBE_S)
                except (OSError, asyncio.TimeoutError):  # refused, unreachable, or dropped
                    continue
                writer.close()
                return True
            return False

        ranks = [r for r in self.plan.ranks if r.serves_http]
        found = await together(*(taken(r) for r in ranks))
        return [BusyPort(r.node, r.rank, r.port) for r, busy in zip(ranks, found, strict=True) if busy]

    # -- launch ----------------------------------------------------------------------------
    async def up(self, image_check: bool = True, adopt: bool = False,
                 port_check: bool = True, memory_check: bool = True) -> None:
        """Launch every rank (all at once by default). Ranks already running are reattached,
        not relaunched. Another owner's containers of this recipe stop it (``HeldElsewhere``,
        which says whose) unless ``adopt``: then they are taken over (reattached if running).
        Before anything starts, the image must be the same build on every node
        (``image_check``; else ``ImageMismatch``, which names the nodes), every rank's
        container name must be free or held by the operator's own stopped container (else
        ``NameClash``, which names each), and no rank's API port may be taken on its node
        (``port_check``; else ``PortsInUse``, which names each: the rank would fail at bind
        after the others had started), and every node must have the memory its ranks need
        (``memory_check``; else ``WontFit``, which names each with its figures; each node's
        verdict, or why it cannot tell, is a notice)."""
        mark("up: attach")
        attached = await self.attach(follow=False, adopt=adopt, say_held=False)
        blocking = [h for h in self.held if not self.ranks[h.rank].has_container]
        if blocking:
            raise HeldElsewhere(self.recipe.slug, self.cluster.name, self.owner, blocking)
        if attached and any(r.state in RUNNING for r in self.ranks):
            self.board.notice("info", "ranks are already running: reattached, nothing relaunched")
            self.start_following()
            return
        # the fit is read while the image, names and ports are checked (an SSH session and a
        # Python start a node: about as long as the rest together)
        fit = asyncio.create_task(self.check_memory()) if memory_check and self.shells else None
        if memory_check and not self.shells:
            self.board.notice("warning", f"memory fit not checked: the {self.cluster.kind} runtime "
                                         "reaches no node's shell before the launch")
        fits: list[NodeFit] = []
        try:
            if image_check and isinstance(self.runtime, Images):
                mark("up: image check")
                check = await self.check_images()
                if not check.ok:
                    raise ImageMismatch(check, self.recipe.slug)
            await self._free_names()
            if port_check:
                mark("up: port check")
                busy = await self.check_ports()
                if busy:
                    raise PortsInUse(busy)
            if fit is not None:
                mark("up: memory check")
                fits = await fit
                self._say_fit(fits)
        finally:
            if fit is not None and not fit.done():  # up refused first: the fit is given up,
                fit.cancel()  # and awaited, so none of its node commands outlives up
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await fit
        mark("up: run created")
        run = self.store.create(self.recipe.slug)
        run.write_plan(self.plan)
        run.event("up", plan_hash=self.plan.plan_hash, cluster=self.cluster.name)
        if fits:
            run.event("memory_fit", nodes=[f.to_json() for f in fits])
        self.board.new_checks()
        self.board.changed.clear()
        self.board.formed = False
        for info in self.ranks:
            info.new_launch()
        self._start_run(run, fresh=True)
        if not run.try_lock():
            raise SparkError("another sparktui (a console or a watch) follows this run")
        self.following = True
        if self.plan.staging:  # data first: verification only when the ledgers are good
            for info in self.ranks:
                self.board.set_state(info, "staging")
            failed = [r for r in await self.stage() if not r.ok]
            if failed:
                for info in self.ranks:
                    reason = next((r.error for r in failed if r.node == info.node.name),
                                  "staging failed on another node")
                    self.board.set_state(info, "failed", Cause("staging", text=reason))
                for r in failed:
                    self.board.notice("error", r.error or f"{r.node}: staging failed")
                return
        # each node's memory just before the first container starts: what a restart waits for
        self.baselines = record_baseline(self.board, run, self.shells,
                                         await read_baseline(self.shells, self.nodes))
        self.board.boot_started = time.monotonic()
        await self._launch_in_order(self.ranks)
        self._start_background()

    async def check_memory(self) -> list[NodeFit]:
        """Whether each node has the memory its ranks need (``backend.memfit``): a verdict per
        node, every node at once."""
        return await check_fit(self.recipe, self.plan, self.nodes, self.shells,
                               getattr(self.runtime, "agent_python", "python3"))

    def _say_fit(self, fits: list[NodeFit]) -> None:
        """Each node's verdict as a notice, or, when a node cannot hold its ranks, ``WontFit``
        naming each such node."""
        short = [f for f in fits if f.verdict == "short"]
        unknown: dict[str, list[str]] = {}  # one notice for the nodes that cannot tell alike
        for f in fits:
            if f.verdict == "fits":
                self.board.notice("info", f.said())
            elif f.verdict == "unknown":
                unknown.setdefault(f.sentence(), []).append(f.node)
        for said, nodes in unknown.items():
            self.board.notice("warning", f"{', '.join(nodes)}: memory: {said}")
        if short:
            raise WontFit(short)

    async def _free_names(self) -> None:
        """Before ``up`` starts anything: every rank's container name is free, or made free
        (``owners.Names``); else ``NameClash`` naming each, and nothing starts."""
        names = self._names()
        whys = await together(*(
            names.clear(self.runtimes[i.node.name], i.node.name,
                        self.plan.ranks[i.rank].container.name) for i in self.ranks))
        if any(whys):
            raise NameClash("; ".join(w for w in whys if w) + "; nothing was started")

    def _names(self) -> Names:
        return Names(self.owner, self._adopted, self.adoptions)

    async def _launch(self, info: RankInfo) -> None:
        run = self.run
        assert run is not None
        self.board.set_state(info, "creating")
        mark(f"rank {info.rank}: create")
        before = info.container_id
        try:
            st = await self._names().create(self.runtimes[info.node.name], info.node.name,
                                            self.plan.ranks[info.rank].container, {LABEL_RUN: run.id})
        except Exception as exc:
            made = None if isinstance(exc, ImageMissing) else await self._made_meanwhile(info, before)
            if made is None:
                why = sentence(exc)
                code: CauseCode = "could_not_start"
                if isinstance(exc, ImageMissing):
                    why, code = f"{why}; run sparktui image sync {self.recipe.slug}", "image_missing"
                self._not_started(info, Cause(code, text=why))
                self.board.notice("error", f"rank {info.rank} ({info.node.name}): could not start: {why}")
                return
            st = made
            self.board.notice("warning", f"rank {info.rank} ({info.node.name}): the engine's answer "
                                         f"to the create was lost ({sentence(exc)}), but container "
                                         f"{short_id(st.id)} was made: it is the rank's")
        info.container_id = st.id
        info.started = time.monotonic()
        # from now on this run owns the container's log from its first line, even if no
        # sparktui follows it until a later catch-up: saved before the rank is followed, the
        # fsync in a thread (on the event loop the ranks' fsyncs waited for each other)
        run.set_cursor(info.rank, st.id, None, defer=True)
        snapshot = run.take_cursors()
        if snapshot is not None:
            try:
                await asyncio.to_thread(run.write_cursors, snapshot)
            except OSError as exc:  # a full disk: kept in memory, written with the next save
                self.board.notice("warning", f"could not save the log cursors of run {run.id}: "
                                             f"{sentence(exc)}")
        self.board.set_state(info, "booting")
        self.follower.follow(info)

    def start_following(self) -> None:
        """Follow every known container, if no other sparktui process already does; keep the
        status document meanwhile (``backend.statusdoc``)."""
        run = self.run
        if run is None or self._closed:
            return
        if not run.try_lock():
            self.board.notice("info", "another sparktui is following this run; showing its files")
            return
        self.following = True
        for info in self.ranks:
            if info.container_id and not self.follower.following(info.rank):
                self.follower.follow(info)
        self._start_background()

    def _start_background(self) -> None:
        jobs: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
            "health": self.health.loop, "timeout": self.boot.timeout_loop,
            "memory": self.memory.loop}
        if isinstance(self.runtime, Scheduled):
            jobs["allocation"] = self._allocation_loop
        if self.canary is not None:
            jobs["canary"] = self.canary.loop
        if self.engines is not None:
            jobs["engines"] = self.engines.loop
        if self.metrics.interval is not None and self.metrics.ranks:
            jobs["metrics"] = self.metrics.loop
        if self.keeper is None:  # one, whichever way this process came to follow the run
            self.keeper = StatusKeeper(self._kept_document,
                                       lambda text: self.board.notice("warning", text))
        jobs["status"] = self.keeper.loop
        for name, job in jobs.items():
            if name not in self._tasks or self._tasks[name].done():
                self._tasks[name] = asyncio.create_task(job(), name=name)

    async def allocation(self) -> str | None:
        """The scheduler's allocation the ranks run in, as a sentence; None on a runtime with
        no scheduler, or when there is none (or the scheduler cannot be asked: said why)."""
        if not isinstance(self.runtime, Scheduled):
            return None
        try:
            return await self.runtime.allocation()
        except NodeError as exc:
            return f"the allocation is not known: {sentence(exc)}"

    async def _allocation_loop(self) -> None:
        """While following: the allocation (its time left) for the console, each time its
        sentence changes."""
        said: str | None = None
        while not self._closed:
            text = await self.allocation() or ""
            self.allocation_said, self.allocation_asked = text or None, True
            if text != said:
                self.emit(AllocationChanged(text))
                said = text
            # while a rank is not ready (a group restart is a new job) the allocation is news:
            # asked every second then, and a rank that falls is seen within one
            for _ in range(round(ALLOCATION_EVERY_S / ALLOCATION_BOOTING_S)):
                await asyncio.sleep(ALLOCATION_BOOTING_S)
                if not all(info.state == "ready" for info in self.ranks):
                    break

    async def wait(self, timeout: float | None = None, grace: float = 3.0) -> bool:
        """Until every rank is ready (True) or one failed / the time ran out (False)."""
        ready = await self.boot.wait(timeout, grace)
        if not ready:
            await self.verdict.settle()  # a failed rank's kernel verdict, before it is reported
        return ready

    def grep_history(self, line_filter: LineFilter, ranks: list[int], *, cap: int,
                     run: Run | None = None) -> AsyncGenerator[GrepProgress, None]:
        """Every line ``run`` (default: the current one) captured of ``ranks`` through the
        console's grep, scanned from its files in a thread: progress (a live count) every
        0.1 s, then the newest ``cap`` kept lines (``backend/history.py``)."""
        target = run or self.run
        if target is None:
            raise SparkError("no run to grep")
        return grep_run(target, ranks, line_filter, cap=cap, pool=self.scanners)

    def warm_grep(self, ranks: list[int], run: Run | None = None) -> None:
        """A grep is coming (the console's grep input opened): start the scanner processes a
        grep over ``run``'s files would use, so the first pattern does not wait for them."""
        target = run or self.run
        if target is not None:
            self.scanners.warm(scanners_for({rank: target.log(rank).path for rank in ranks}))

    def cool_grep(self) -> None:
        """No grep coming (the input closed): end the scanners started ahead."""
        self.scanners.cool()

    async def catch_up(self, checks: bool = True) -> None:
        """Copy into the run's files what containers wrote while no sparktui was watching.
        ``checks``: False after an attach that did not replay them (its lines go to the files
        and the listeners only)."""
        await self.follower.catch_up(checks)

    # -- actions ---------------------------------------------------------------------------
    async def restart(self, rank: int) -> None:
        """Replace only this rank's container; its log goes on in the same run after a marker.
        In a group that had formed the other ranks are failed by it: see ``restart_group``."""
        if not isinstance(self.runtime, RestartOne):
            raise SparkError(f"the {self.cluster.kind} runtime replaces the whole group only: "
                             "restart the group")
        run = await self._own_run()
        await self._replace([self.ranks[rank]], run, "by the operator")
        self.start_following()  # the other ranks of the TP group may fall over: watch them too

    async def restart_group(self, by: str = "by the operator") -> None:
        """Replace every rank's container, in the same run: each log goes on after a marker,
        every restart count goes up, the boot checks start over, workers start first."""
        run = await self._own_run()
        self.board.formed = False  # nothing is lost alone: every rank goes
        await self._replace(self.ranks, run, f"with its group {by}")
        self.start_following()

    async def _own_run(self) -> Run:
        """The run to act on (found by attaching if need be), locked by this process."""
        if self.run is None and not await self.attach(follow=False):
            if self.held:
                raise HeldElsewhere(self.recipe.slug, self.cluster.name, self.owner, self.held)
            raise SparkError("nothing is running for this recipe")
        run = self.run
        assert run is not None
        if not run.try_lock():
            raise SparkError("another sparktui (a console or a watch) follows this run; restart "
                             "from there")
        self.following = True
        return run

    async def _replace(self, infos: list[RankInfo], run: Run, how: str) -> None:
        alone = len(infos) == 1 and isinstance(self.runtime, RestartOne)

        async def stop(info: RankInfo) -> str | None:
            old = info.container_id
            self.board.set_state(info, "restarting")
            if old and not info.removed:
                rt = self.runtimes[info.node.name]
                info.stopping = True
                if alone and isinstance(self.runtime, RestartOne):  # the others run on
                    await self.runtime.retire(info.node.name, old, timeout=10)
                else:
                    await rt.stop(old, timeout=10)
                await self.follower.drain(info)  # what the old container still wrote
                await rt.remove(old)
                info.stopping = False
            return old

        waiter = RestartWait(self.board, run, self.plan.memory, self.runtime, self.shells,
                             self.baselines, infos)
        await waiter.remember()  # a local rank's processes are known by their tree until removed
        olds = await together(*(stop(info) for info in infos))
        self.adoptions.forget([old for old in olds if old])  # the new ones carry our label
        for info, old in zip(infos, olds, strict=True):
            # a restart tried again (the last try failed after its marker: no container was
            # followed since) is the same replacement: one marker, one count, one event
            if run.cursors().get(info.rank, {}).get("container_id") != NEXT_CONTAINER:
                shown = short_id(old) if old else "-"
                self.follower.ingest(info, [(utc_now(), f"{MARKER}rank {info.rank} restarted "
                                                        f"{how} (container {shown} replaced) ---")])
                info.restarts += 1
                # the marker's line number: a replay starts the rank's checks after it (on a
                # full disk the event waits in memory: nothing starts before it is written)
                run.event("restart", rank=info.rank, old=old, group=len(infos) > 1, how=how,
                          line=run.log(info.rank).lines)
                # the marker is the file's, not a container's: accounted at once, so that
                # nothing resuming the old container cuts it off, and the next container is
                # read from its start after it (``Run.resume``); in memory first, then saved
                run.set_cursor(info.rank, NEXT_CONTAINER, None, defer=True)
                self._save_cursors(run)
            self.checks.reset(info.rank)
            info.exit_code, info.health = None, None
        if run.unwritten and not run.flush_events():
            # no new container before its restart is on disk: a process killed meanwhile would
            # leave a run whose events put the last restart before the old container's end,
            # and a reattach would judge the new one by the old one's last lines (the soak: a
            # full disk, then the watch killed)
            raise SparkError(f"the run's events cannot be written to {run.dir} (is the disk "
                             "full?): the restart waits until they can be")
        await waiter.wait()  # memory back and the old processes gone, or its time is up
        self.board.boot_started = time.monotonic()
        self.board.changed.clear()
        await self._launch_in_order(infos, "workers-first")

    async def _launch_in_order(self, infos: list[RankInfo], order: LaunchOrder | None = None) -> None:
        """In ``order`` (default: the Orchestrator's ``launch_order``, see ``LaunchOrder``)."""
        if isinstance(self.runtime, Allocation) and not await self._allocated(infos):
            return
        head = [i for i in infos if i.rank == 0]
        workers = [i for i in infos if i.rank != 0]
        groups = {"workers-first": [workers, head], "head-first": [head, workers],
                  "parallel": [infos]}[order or self.launch_order]
        for group in groups:
            await together(*(self._launch(info) for info in group))

    def _save_cursors(self, run: Run) -> None:
        """The cursors on disk now; on a full disk said, and kept to be written next time."""
        try:
            run.save_cursors()
        except OSError as exc:
            self.board.notice("warning", f"could not save the log cursors of run {run.id}: "
                                         f"{sentence(exc)}")

    async def _made_meanwhile(self, info: RankInfo, before: str | None) -> ContainerState | None:
        """The rank's container of this run that a create whose answer was lost (the link or
        the engine went away mid-request) made anyway, running, once the node answers again;
        None when there is none or the node still does not answer. Left alone, it would run
        with no one following it (the chaos soak found its lines lost and its group stuck).
        One made and never started (the engine killed between the create and the start) is
        removed: the rank could not start, and has no container a reopened watch would take
        for a stopped rank (the soak, seed 202: the group left booting without its head)."""
        run = self.run
        assert run is not None
        for _ in range(3):
            try:
                await self.runtime.connect(info.node.name)
                own, _others = await self._find(info)
            except Exception:  # still away: try again, then give up
                await asyncio.sleep(1.0)
                continue
            if own is None or own.id == before or own.labels.get(LABEL_RUN) != run.id:
                return None
            if own.running:
                return own
            with contextlib.suppress(Exception):  # its engine away again: a reattach sees it
                await self.runtimes[info.node.name].remove(own.id)
            return None
        return None

    def _not_started(self, info: RankInfo, cause: Cause) -> None:
        """No process of the rank ever ran: failed, with no exit code to wait for."""
        info.exit_code, info.ended = None, True
        self.board.set_state(info, "failed", cause)

    async def _allocated(self, infos: list[RankInfo]) -> bool:
        """The scheduler's nodes for ``infos``: queued (with its reason) until it gives them;
        False, every rank failed with the reason, when it cannot."""
        assert isinstance(self.runtime, Allocation) and self.run is not None

        def waiting(why: str) -> None:
            for info in infos:
                self.board.set_state(info, "queued", Cause("queued", text=why))

        waiting("submitting the job")
        try:
            await self.runtime.allocate(self.plan, self.run.id, waiting)
        except Exception as exc:
            for info in infos:
                self._not_started(info, Cause("could_not_start", text=sentence(exc)))
            self.board.notice("error", f"no allocation: {sentence(exc)}")
            return False
        return True

    async def down(self, adopt: bool = False) -> None:
        """Stop and remove this operator's container of every rank (all nodes at once);
        another owner's only with ``adopt``."""
        if self.run is None or adopt:
            await self.attach(follow=False, adopt=adopt)

        async def one(info: RankInfo) -> None:
            if not info.has_container:
                return
            assert info.container_id is not None
            info.stopping = True
            rt = self.runtimes[info.node.name]
            try:
                await rt.stop(info.container_id, timeout=10)
                await rt.remove(info.container_id)
            except (RuntimeLost, NodeError) as exc:
                self.board.notice("error", f"rank {info.rank} ({info.node.name}): {sentence(exc)}")
                return
            info.removed = True
            self.adoptions.forget([info.container_id])
            self.board.set_state(info, "stopped", Cause("removed_by_down"))
        await together(*(one(i) for i in self.ranks))
        if isinstance(self.runtime, Allocation) and not any(i.has_container for i in self.ranks):
            try:
                await self.runtime.release()  # the nodes go back to the scheduler
            except (RuntimeLost, NodeError) as exc:
                self.board.notice("error", f"the allocation was not released: {sentence(exc)}")
        if self.run is not None:  # ``kept``: ranks whose container is still there (an error)
            self.run.event("down", kept=[i.rank for i in self.ranks if i.has_container])

    async def close(self) -> None:
        """Stop following; containers keep running."""
        self._closed = True
        self.follower.closed = self.health.closed = self.boot.closed = True
        if self.canary is not None:
            self.canary.closed = True
        if self.engines is not None:
            self.engines.closed = True
        self.metrics.closed = True
        self.scanners.cool()
        await self.memory.close()  # a memory stop under way ends first: its containers must go
        if self._sampler is not None:
            await self._sampler.stop()
        await self.follower.close()
        await self.verdict.close()
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.run is not None:
            self.run.unlock()
        await self.runtime.close()


def _monotonic_at(ts: str | None) -> float | None:
    """``time.monotonic()`` as it read at wall-clock ``ts`` (a container's start, for its uptime
    after a reattach); never in the future, whatever the node's clock says."""
    epoch = ts_epoch(ts)
    if epoch is None:
        return None
    return time.monotonic() - max(0.0, time.time() - epoch)
