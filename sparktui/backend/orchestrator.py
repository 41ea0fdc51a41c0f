"""The Orchestrator: the one API the CLI and the TUI drive.

It owns one transport and one runtime per node, follows every rank's log into the run's files,
evaluates boot checks as lines arrive, probes health, and tells its listener what changed.
Containers outlive it: quitting never stops them, and the next Orchestrator reattaches by label.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sparktui.backend.docker_runtime import DockerRuntime
from sparktui.backend.events import (
    ChecksChanged,
    Event,
    HealthChanged,
    LogBatch,
    NodeChanged,
    NodeTelemetry,
    Notice,
    RankChanged,
    RankStateName,
)
from sparktui.backend.http import request
from sparktui.backend.local_runtime import LocalRuntime
from sparktui.backend.runtime import ContainerState, Runtime, RuntimeLost
from sparktui.backend.smoke import SmokeResult, smoke
from sparktui.backend.staging import Stager, StagingResult
from sparktui.backend.telemetry import DEFAULT_INTERVAL, LOW_MEMORY, Sampler
from sparktui.backend.transport import NodeError, Transport, transport_for
from sparktui.core.checks import BootChecks
from sparktui.core.cluster import Cluster, Node
from sparktui.core.plan import (
    LABEL_CLUSTER,
    LABEL_PLAN,
    LABEL_RANK,
    LABEL_RECIPE,
    Plan,
)
from sparktui.core.recipe import Recipe
from sparktui.core.runstore import MARKER, Run, RunStore, ts_epoch, utc_now

LABEL_RUN = "sparktui.run"
LaunchOrder = Literal["workers-first", "head-first", "parallel"]
LAST_LINES = 20
HEALTH_INTERVAL = 2.0
HEALTH_INTERVAL_BOOTING = 0.5  # a booting rank is probed often: ready is reported promptly


@dataclass
class RankInfo:
    rank: int
    node: Node
    state: RankStateName = "pending"
    container_id: str | None = None
    exit_code: int | None = None
    restarts: int = 0
    health: int | None = None
    detail: str = ""
    started: float | None = None
    last_lines: deque[str] = field(default_factory=lambda: deque(maxlen=LAST_LINES))
    stopping: bool = False
    failed_at: float | None = None  # epoch; the first rank to fail is usually the cause

    @property
    def settled(self) -> bool:
        return self.state in ("ready", "failed", "stopped")


class Orchestrator:
    def __init__(self, recipe: Recipe, cluster: Cluster, plan: Plan, *, state_root: Path,
                 on_event: Callable[[Event], None] | None = None,
                 launch_order: LaunchOrder = "workers-first") -> None:
        self.recipe = recipe
        self.cluster = cluster
        self.plan = plan
        self.state_root = state_root
        self.store = RunStore(state_root)
        self.launch_order = launch_order
        self._listeners: list[Callable[[Event], None]] = [on_event] if on_event else []
        self.nodes = [cluster.nodes[r.rank] for r in plan.ranks]
        self.transports: dict[str, Transport] = {n.name: transport_for(n) for n in self.nodes}
        local_rt = LocalRuntime(state_root / "local") if cluster.is_local else None
        self.runtimes: dict[str, Runtime] = {
            n.name: (local_rt if local_rt is not None else DockerRuntime(self.transports[n.name]))
            for n in self.nodes
        }
        self.ranks = [RankInfo(r.rank, self.nodes[r.rank]) for r in plan.ranks]
        self.checks = BootChecks.from_plan(plan.boot, plan.world)
        self.run: Run | None = None
        self.following = False
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._boot_started: float | None = None
        self._closed = False
        self._ready_event = asyncio.Event()
        self._sampler: Sampler | None = None

    # -- events ----------------------------------------------------------------------------
    def subscribe(self, listener: Callable[[Event], None]) -> None:
        self._listeners.append(listener)

    def emit(self, event: Event) -> None:
        for listener in self._listeners:
            listener(event)

    def notice(self, level: Literal["info", "warning", "error"], text: str) -> None:
        if self.run is not None:
            self.run.event("notice", level=level, text=text)
        self.emit(Notice(level, text))

    def _set_state(self, info: RankInfo, state: RankStateName, detail: str = "",
                   when: float | None = None) -> None:
        """``when``: the epoch second the failure happened on the node (log line or exit)."""
        if info.state == state and info.detail == detail:
            return
        info.state, info.detail = state, detail
        if state == "failed" and info.failed_at is None:
            info.failed_at = when if when is not None else time.time()
        elif state in ("creating", "booting"):
            info.failed_at = None
        if self.run is not None:
            self.run.event("rank", rank=info.rank, state=state, detail=detail,
                           exit_code=info.exit_code, container_id=info.container_id)
        self.emit(RankChanged(info.rank, state, detail, info.exit_code, list(info.last_lines)))
        if state == "failed" or all(r.settled for r in self.ranks):
            self._ready_event.set()  # wake wait(): a failure ends the wait as surely as ready

    # -- nodes -----------------------------------------------------------------------------
    async def connect(self) -> dict[str, str]:
        """Connect to every node at once; returns the nodes that failed, with the reason."""
        async def one(node: Node) -> tuple[str, str | None]:
            try:
                await self.transports[node.name].connect()
            except NodeError as exc:
                self.emit(NodeChanged(node.name, "unreachable", exc.reason))
                return node.name, str(exc)
            self.emit(NodeChanged(node.name, "connected"))
            return node.name, None
        results = await asyncio.gather(*(one(n) for n in self.nodes))
        return {name: err for name, err in results if err}

    def labels(self) -> dict[str, str]:
        return {LABEL_RECIPE: self.recipe.slug, LABEL_CLUSTER: self.cluster.name}

    async def _find(self, info: RankInfo) -> ContainerState | None:
        rt = self.runtimes[info.node.name]
        found = await rt.find({**self.labels(), LABEL_RANK: str(info.rank)})
        found.sort(key=lambda c: (c.running, c.started_at or ""), reverse=True)
        return found[0] if found else None

    # -- attach ----------------------------------------------------------------------------
    async def attach(self, follow: bool = True) -> bool:
        """Find this recipe's containers on every node; True when any exist. Reattaching never
        relaunches anything."""
        states = await asyncio.gather(*(self._find(info) for info in self.ranks),
                                      return_exceptions=True)
        found = False
        run_ids: set[str] = set()
        for info, st in zip(self.ranks, states, strict=False):
            if isinstance(st, BaseException):
                info.detail = str(st)
                self.notice("error", f"rank {info.rank} ({info.node.name}): {st}")
                continue
            if st is None:
                continue
            found = True
            info.container_id = st.id
            if LABEL_RUN in st.labels:
                run_ids.add(st.labels[LABEL_RUN])
            if st.labels.get(LABEL_PLAN) not in (None, self.plan.plan_hash):
                self.notice("warning", f"rank {info.rank} runs plan {st.labels.get(LABEL_PLAN)}, "
                            f"but the recipe on disk plans {self.plan.plan_hash}: the recipe changed "
                            "since launch (restart the ranks to apply it)")
            if st.running:
                info.state = "booting"
                info.started = _monotonic_at(st.started_at)
            else:
                info.exit_code = st.exit_code
                info.state = "failed" if st.exit_code not in (0, None) else "stopped"
                info.detail = f"exited with code {st.exit_code}"
        if not found:
            return False
        run_id = sorted(run_ids)[-1] if run_ids else None
        self.run = (self.store.open(run_id) if run_id else None) or self.store.latest(self.recipe.slug)
        if self.run is None:
            self.run = self.store.create(self.recipe.slug)
            self.run.write_plan(self.plan)
        self._restore_counts()
        await self._replay_checks()
        self._boot_started = time.monotonic()
        for info in self.ranks:
            self.emit(RankChanged(info.rank, info.state, info.detail, info.exit_code))
        if follow:
            self.start_following()
        return True

    def _restore_counts(self) -> None:
        assert self.run is not None
        for ev in self.run.events():
            if ev.get("kind") == "restart":
                rank = int(ev.get("rank", -1))
                if 0 <= rank < len(self.ranks):
                    self.ranks[rank].restarts += 1

    async def _replay_checks(self) -> None:
        """Evaluate checks over what the run's files already hold (since the last restart);
        the files are read in a thread (hours of logs must not hold up the event loop)."""
        run = self.run
        assert run is not None
        for info in self.ranks:
            restarted, batch = await asyncio.to_thread(run.log(info.rank).since_restart)
            if restarted:
                self.checks.reset(info.rank)
            info.last_lines.extend(text for _, text in batch[-LAST_LINES:])
            self.checks.feed(info.rank, batch)
            self._apply_check_state(info)

    # -- telemetry and smoke ---------------------------------------------------------------
    def telemetry(self, interval: float = DEFAULT_INTERVAL, low_memory: int = LOW_MEMORY) -> Sampler:
        """The node sampler over this Orchestrator's connections (start() it to keep sampling)."""
        if self._sampler is None:
            self._sampler = Sampler(self.plan, self.nodes, self.transports, self.emit,
                                    interval=interval, low_memory=low_memory)
        return self._sampler

    async def sample_nodes(self) -> list[NodeTelemetry]:
        sampler = self.telemetry()
        return list(await asyncio.gather(*(sampler.sample(n) for n in self.nodes)))

    async def smoke(self, max_tokens: int = 64) -> SmokeResult:
        """One streamed chat completion to the head."""
        head = self.ranks[0]
        return await smoke(self.probe_host(head), self.plan.ranks[0].port,
                           self.plan.served_model_name, max_tokens=max_tokens)

    # -- staging ---------------------------------------------------------------------------
    async def stage(self, verify_only: bool = False,
                    sample: int | str | None = None) -> list[StagingResult]:
        """Run the recipe's staging jobs on every node at once (nothing to do: empty list)."""
        if not self.plan.staging:
            return []
        stager = Stager(self.plan, self.transports, self.emit, local=self.cluster.is_local)
        results = await stager.run(verify_only=verify_only, sample=sample)
        if self.run is not None:
            for r in results:
                self.run.event("staging", node=r.node, job=r.job, ok=r.ok, error=r.error,
                               bytes_written=r.bytes_written, seconds=r.seconds)
        return results

    # -- launch ----------------------------------------------------------------------------
    async def up(self) -> None:
        """Launch every rank (workers first by default). Ranks already running are reattached,
        not relaunched."""
        if await self.attach(follow=False) and any(
                r.state in ("booting", "ready") for r in self.ranks):
            self.notice("info", "ranks are already running: reattached, nothing relaunched")
            self.start_following()
            return
        self.run = self.store.create(self.recipe.slug)
        self.run.write_plan(self.plan)
        self.run.event("up", plan_hash=self.plan.plan_hash, cluster=self.cluster.name)
        self.checks = BootChecks.from_plan(self.plan.boot, self.plan.world)
        self._ready_event.clear()
        for info in self.ranks:
            info.exit_code, info.health, info.container_id = None, None, None
            info.last_lines.clear()
        if not self.run.try_lock():
            raise RuntimeError("another sparktui follows this run")
        self.following = True
        if self.plan.staging:  # data first: verification only when the ledgers are good
            for info in self.ranks:
                self._set_state(info, "staging")
            failed = [r for r in await self.stage() if not r.ok]
            if failed:
                for info in self.ranks:
                    reason = next((r.error for r in failed if r.node == info.node.name),
                                  "staging failed on another node")
                    self._set_state(info, "failed", f"staging: {reason}")
                for r in failed:
                    self.notice("error", r.error or f"{r.node}: staging failed")
                return
        self._boot_started = time.monotonic()
        head, workers = self.ranks[0], self.ranks[1:]
        if self.launch_order == "workers-first":
            groups = [workers, [head]]
        elif self.launch_order == "head-first":
            groups = [[head], workers]
        else:
            groups = [self.ranks]
        for group in groups:
            await asyncio.gather(*(self._launch(info) for info in group))
        self._start_background()

    async def _launch(self, info: RankInfo) -> None:
        assert self.run is not None
        spec = self.plan.ranks[info.rank].container
        self._set_state(info, "creating")
        try:
            st = await self.runtimes[info.node.name].run(spec, {LABEL_RUN: self.run.id})
        except Exception as exc:
            info.exit_code = None
            self._set_state(info, "failed", f"could not start: {_sentence(exc)}")
            self.notice("error", f"rank {info.rank} ({info.node.name}): could not start: "
                                 f"{_sentence(exc)}")
            return
        info.container_id = st.id
        info.started = time.monotonic()
        # from now on this run owns the container's log from its first line, even if no
        # sparktui follows it until a later catch-up
        self.run.set_cursor(info.rank, st.id, None, save=True)
        self._set_state(info, "booting")
        self._follow(info)

    def start_following(self) -> None:
        """Follow every known container, if no other sparktui process already does."""
        if self.run is None or self._closed:
            return
        if not self.run.try_lock():
            self.notice("info", "another sparktui is following this run; showing its files")
            return
        self.following = True
        for info in self.ranks:
            task = self._tasks.get(f"follow-{info.rank}")
            if info.container_id and (task is None or task.done()):
                self._follow(info)
        self._start_background()

    def _start_background(self) -> None:
        for name, coro in (("health", self._health_loop), ("timeout", self._timeout_loop)):
            if name not in self._tasks or self._tasks[name].done():
                self._tasks[name] = asyncio.create_task(coro(), name=name)

    def _follow(self, info: RankInfo) -> None:
        key = f"follow-{info.rank}"
        old = self._tasks.get(key)
        if old is not None and not old.done():
            old.cancel()
        assert info.container_id is not None
        self._tasks[key] = asyncio.create_task(self._follow_loop(info, info.container_id), name=key)

    async def _follow_loop(self, info: RankInfo, container_id: str) -> None:
        """Read the container's log into the run's file; resume after drops without gaps."""
        assert self.run is not None
        run = self.run
        rt = self.runtimes[info.node.name]
        cursor = await asyncio.to_thread(run.resume, info.rank, container_id)
        delay = 0.5
        while not self._closed:
            try:
                async for chunk in rt.logs(container_id, cursor):
                    self._ingest(info, chunk.lines)
                    cursor = chunk.cursor
                    run.set_cursor(info.rank, container_id, cursor)
                    delay = 0.5
                run.save_cursors()
                st = await rt.inspect(container_id)
                self.emit(NodeChanged(info.node.name, "connected"))
                if st.running:
                    await asyncio.sleep(0.2)
                    continue
                self._exited(info, st)
                return
            except asyncio.CancelledError:
                raise
            except (RuntimeLost, NodeError) as exc:
                self.emit(NodeChanged(info.node.name, "reconnecting", _sentence(exc)))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                with contextlib.suppress(NodeError):
                    await self.transports[info.node.name].connect()

    def _ingest(self, info: RankInfo, lines: list[tuple[str, str]]) -> None:
        assert self.run is not None
        numbered = self.run.log(info.rank).append(lines)
        info.last_lines.extend(text for _, _, text in numbered[-LAST_LINES:])
        self.emit(LogBatch(info.rank, numbered))
        updates = self.checks.feed(info.rank, [(no, text) for no, _, text in numbered])
        if updates:
            stamps = {no: ts for no, ts, _ in numbered}
            self.emit(ChecksChanged(updates))
            self._apply_check_state(info, stamps)

    def _apply_check_state(self, info: RankInfo, stamps: dict[int, str] | None = None) -> None:
        fatal = self.checks.fatal(info.rank)
        if fatal is not None and info.state in ("booting", "creating"):
            when = ts_epoch((stamps or {}).get(fatal.line_no))
            self._set_state(info, "failed", f"line {fatal.line_no}: {fatal.text}", when)
            return
        if info.state == "booting" and self._ready_line_seen(info.rank):
            self._set_state(info, "ready")
            self._maybe_finish_boot()

    def _ready_line_seen(self, rank: int) -> bool:
        for check in self.checks.checks:
            if check.kind == "ready" and check.applies_to(rank):
                st = self.checks.status.get((check.id, rank))
                return st is not None and st.state == "passed"
        return False

    def _maybe_finish_boot(self) -> None:
        if all(r.state == "ready" for r in self.ranks):
            updates = [u for info in self.ranks for u in self.checks.finish(info.rank)]
            if updates:
                self.emit(ChecksChanged(updates))
            if self.run is not None:
                self.run.event("ready", seconds=round(time.monotonic() - (self._boot_started or 0), 2))
            self._ready_event.set()

    def _exited(self, info: RankInfo, st: ContainerState) -> None:
        info.exit_code = st.exit_code
        if info.stopping:
            self._set_state(info, "stopped", f"exit code {st.exit_code}")
            return
        tail = " | ".join(list(info.last_lines)[-3:])
        self._set_state(info, "failed", f"exited with code {st.exit_code}: {tail}",
                        ts_epoch(st.finished_at))
        self.emit(ChecksChanged(self.checks.finish(info.rank)))

    # -- health and timeout ----------------------------------------------------------------
    def probe_host(self, info: RankInfo) -> str:
        return "127.0.0.1" if info.node.local else info.node.host

    async def probe(self, info: RankInfo) -> int | None:
        port = self.plan.ranks[info.rank].port
        try:
            res = await request(self.probe_host(info), port, "/health", timeout=2.0)
        except (OSError, asyncio.TimeoutError):
            return None
        code = res.status
        if info.rank == 0 and code == 200:
            try:
                models = await request(self.probe_host(info), port, "/v1/models", timeout=2.0)
                served = self.plan.served_model_name
                if models.status != 200 or served.encode() not in models.body:
                    return 503
            except (OSError, asyncio.TimeoutError):
                return None
        return code

    async def probe_all(self) -> None:
        codes = await asyncio.gather(*(self.probe(i) for i in self.ranks))
        for info, code in zip(self.ranks, codes, strict=False):
            if code != info.health:
                info.health = code
                self.emit(HealthChanged(info.rank, code))
            if code == 200 and info.state == "booting" and (
                    info.rank != 0 or self._ready_line_seen(0)):
                self._set_state(info, "ready")
                self._maybe_finish_boot()

    async def _health_loop(self) -> None:
        while not self._closed:
            await self.probe_all()
            booting = any(r.state in ("creating", "booting") for r in self.ranks)
            await asyncio.sleep(HEALTH_INTERVAL_BOOTING if booting else HEALTH_INTERVAL)

    async def _timeout_loop(self) -> None:
        budget = self.plan.boot.timeout_s
        while not self._closed:
            await asyncio.sleep(0.5)
            if self._boot_started is None:
                continue
            if time.monotonic() - self._boot_started > budget:
                for info in self.ranks:
                    if info.state in ("booting", "creating"):
                        self._set_state(info, "failed", f"boot timed out after {budget:g} s")
                        self.emit(ChecksChanged(self.checks.finish(info.rank)))
                self._ready_event.set()
                return
            if all(r.settled for r in self.ranks):
                return

    async def wait(self, timeout: float | None = None, grace: float = 3.0) -> bool:
        """Until every rank is ready (True) or one failed / the time ran out (False). After a
        failure, the rest of the TP group gets ``grace`` seconds to report how it fell over."""
        async def settled() -> None:
            while not all(r.settled for r in self.ranks):
                self._ready_event.clear()
                if any(r.state == "failed" for r in self.ranks):
                    end = time.monotonic() + grace
                    while time.monotonic() < end and not all(r.settled for r in self.ranks):
                        await asyncio.sleep(0.1)
                    return
                await self._ready_event.wait()
        try:
            await asyncio.wait_for(settled(), timeout)
        except asyncio.TimeoutError:
            return False
        return all(r.state == "ready" for r in self.ranks)

    # -- actions ---------------------------------------------------------------------------
    async def restart(self, rank: int) -> None:
        """Replace only this rank's container; its log goes on in the same run after a marker."""
        info = self.ranks[rank]
        if self.run is None and not await self.attach(follow=False):
            raise RuntimeError("nothing is running for this recipe")
        assert self.run is not None
        if not self.run.try_lock():
            raise RuntimeError("another sparktui follows this run; restart from there")
        self.following = True
        old = info.container_id
        self._set_state(info, "restarting")
        task = self._tasks.pop(f"follow-{rank}", None)
        rt = self.runtimes[info.node.name]
        if old:
            info.stopping = True
            await rt.stop(old, timeout=10)
            if task is not None:  # drain what the old container still wrote
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, 5)
            await rt.remove(old)
            info.stopping = False
        info.restarts += 1
        self.run.event("restart", rank=rank, old=old)
        self._ingest(info, [(utc_now(), f"{MARKER}rank {rank} restarted by the operator "
                                        f"(container {(old or '-')[:12]} replaced) ---")])
        self.checks.reset(rank)
        info.exit_code, info.health = None, None
        self._boot_started = time.monotonic()
        await self._launch(info)
        self.start_following()  # the other ranks of the TP group may fall over: watch them too

    async def down(self) -> None:
        """Stop and remove every rank's container (all nodes at once)."""
        if self.run is None:
            await self.attach(follow=False)
        async def one(info: RankInfo) -> None:
            if info.container_id is None:
                return
            info.stopping = True
            rt = self.runtimes[info.node.name]
            try:
                await rt.stop(info.container_id, timeout=10)
                await rt.remove(info.container_id)
            except (RuntimeLost, NodeError) as exc:
                self.notice("error", f"rank {info.rank} ({info.node.name}): {_sentence(exc)}")
                return
            self._set_state(info, "stopped", "removed by down")
        await asyncio.gather(*(one(i) for i in self.ranks))
        if self.run is not None:
            self.run.event("down")

    async def catch_up(self) -> None:
        """Copy into the run's files what containers wrote while no sparktui was watching."""
        if self.run is None or not self.run.try_lock():
            return
        async def one(info: RankInfo) -> None:
            if not info.container_id or self.run is None:
                return
            saved = self.run.cursors().get(info.rank, {})
            if saved and saved.get("container_id") != info.container_id:
                return  # a container this run never followed; do not mix its lines in
            cursor = await asyncio.to_thread(self.run.resume, info.rank, info.container_id)
            try:
                async for chunk in self.runtimes[info.node.name].logs(
                        info.container_id, cursor, follow=False):
                    self._ingest(info, chunk.lines)
                    self.run.set_cursor(info.rank, info.container_id, chunk.cursor)
            except (RuntimeLost, NodeError) as exc:
                self.notice("warning", f"rank {info.rank}: could not catch up: {_sentence(exc)}")
        await asyncio.gather(*(one(i) for i in self.ranks))
        self.run.unlock()

    async def close(self) -> None:
        """Stop following; containers keep running."""
        self._closed = True
        if self._sampler is not None:
            await self._sampler.stop()
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.run is not None:
            self.run.unlock()
        await asyncio.gather(*(t.close() for t in self.transports.values()),
                             return_exceptions=True)

    def failures(self) -> list[RankInfo]:
        """Failed ranks, the first to fail first."""
        failed = [r for r in self.ranks if r.state == "failed"]
        return sorted(failed, key=lambda r: r.failed_at or 0.0)

    def status(self) -> list[dict[str, object]]:
        return [{
            "rank": i.rank, "node": i.node.name, "state": i.state,
            "container_id": i.container_id, "exit_code": i.exit_code, "restarts": i.restarts,
            "checks": self.checks.rank_summary(i.rank), "health": i.health, "detail": i.detail,
        } for i in self.ranks]


def _monotonic_at(ts: str | None) -> float | None:
    """``time.monotonic()`` as it read at wall-clock ``ts`` (a container's start, for its uptime
    after a reattach); never in the future, whatever the node's clock says."""
    epoch = ts_epoch(ts)
    if epoch is None:
        return None
    return time.monotonic() - max(0.0, time.time() - epoch)


def _sentence(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0] if "\n" in text else text
