"""The main screen: recipes on the left; ranks, staging, logs and boot checks on the right.

It owns the session (one recipe opened on its cluster), turns the Orchestrator's messages into
widget updates, and runs every long action as a worker so the screen never waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Static

from sparktui.backend.doctor import Finding, doctor
from sparktui.backend.orchestrator import RankInfo
from sparktui.core.checks import BootChecks, Check
from sparktui.core.plan import build_plan
from sparktui.ui.bridge import EventBridge
from sparktui.ui.catalog import RecipeInfo, default_slug, load_catalog
from sparktui.ui.colors import theme_colors
from sparktui.ui.formatting import bar, state_style
from sparktui.ui.keys import bindings
from sparktui.ui.logstore import LogStore, lines_since_restart
from sparktui.ui.messages import (
    ChecksUpdated,
    HealthUpdated,
    LogLines,
    NodeSampled,
    NodeUpdated,
    NoticePosted,
    RankUpdated,
    StagingUpdated,
)
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.add_check_screen import AddCheckScreen, NewCheck
from sparktui.ui.screens.confirm_screen import ConfirmScreen
from sparktui.ui.screens.doctor_screen import DoctorScreen
from sparktui.ui.screens.events_screen import EventRecord, EventsScreen
from sparktui.ui.screens.help_screen import HelpScreen
from sparktui.ui.screens.plan_screen import PlanScreen
from sparktui.ui.screens.restart_screen import RestartScreen
from sparktui.ui.session import Session
from sparktui.ui.settings import save_state
from sparktui.ui.widgets.checks_panel import ChecksPanel
from sparktui.ui.widgets.log_panel import LogPanel
from sparktui.ui.widgets.nodes_panel import NodesPanel
from sparktui.ui.widgets.rank_table import RankTable
from sparktui.ui.widgets.recipe_list import RecipeList
from sparktui.ui.widgets.recipe_pane import RecipePane
from sparktui.ui.widgets.staging_panel import StagingPanel

MAX_EVENTS = 2000
NARROW = 110  # below this many columns: fewer rank columns, no recipe pane, a compact footer
SHORT = 32  # below this many rows (or when narrow) the nodes panel starts hidden: logs come first
TOAST_CHARS = 120
FAILURE_TOAST_DELAY = 0.6
SEVERITY = {"info": "information", "warning": "warning", "error": "error"}


def sentence(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def has_container(info: RankInfo) -> bool:
    """Whether the rank has a container (running or exited) that down has not removed."""
    return info.container_id is not None and not (info.state == "stopped" and
                                                  info.detail == "removed by down")


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = bindings()
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (NARROW, "-wide")]  # noqa: RUF012

    def __init__(self, options: ConsoleOptions) -> None:
        super().__init__(id="main")
        self.options = options
        self.store = LogStore(0, options.window)
        self.infos: list[RecipeInfo] = []
        self.session: Session | None = None
        self.bridge: EventBridge | None = None
        self.highlighted: str | None = None
        self.busy: str | None = None
        self.events: list[EventRecord] = []
        self.details: dict[int, str] = {}
        self.node_status: dict[str, str] = {}
        self._warned: set[str] = set()  # telemetry warnings already reported, until they clear
        self._nodes_shown: bool | None = None  # the operator's choice (m), once made
        self._failed: list[tuple[int, str]] = []
        self._failure_timer: Timer | None = None
        self.ready = asyncio.Event()  # the first recipe is open (tests wait on it)

    # -- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="side"):
                yield RecipeList(id="recipes")
                yield RecipePane(id="recipe")
            with Vertical(id="work"):
                yield RankTable(self.options.clock, id="ranks")
                yield Static("", id="rank-detail")
                yield StagingPanel(id="staging")
                yield NodesPanel(id="nodes")
                yield LogPanel(self.store, id="logs")
                yield ChecksPanel(id="checks")
        yield Footer()

    @property
    def ranks_table(self) -> RankTable:
        return self.query_one(RankTable)

    @property
    def logs(self) -> LogPanel:
        return self.query_one(LogPanel)

    @property
    def checks_panel(self) -> ChecksPanel:
        return self.query_one(ChecksPanel)

    @property
    def nodes_panel(self) -> NodesPanel:
        return self.query_one(NodesPanel)

    @property
    def staging(self) -> StagingPanel:
        return self.query_one(StagingPanel)

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < NARROW
        if self._nodes_shown is None:  # until m says otherwise: logs first on a small screen
            self.nodes_panel.display = not narrow and event.size.height >= SHORT
        self.ranks_table.set_compact(narrow)
        footer = self.query_one(Footer)
        footer.compact = narrow
        footer.show_command_palette = not narrow

    def on_mount(self) -> None:
        self.query_one(RecipeList).border_title = "Recipes"
        self.query_one("#recipe", RecipePane).border_title = "recipe"
        self.staging.border_title = "Staging"
        self.nodes_panel.border_title = "Nodes"
        self.logs.border_title = "Logs"
        self.checks_panel.border_title = "Boot checks"
        self.checks_panel.border_subtitle = "enter: show the line · + add · c hide"
        self.staging.display = False
        self.checks_panel.display = False
        self.logs.grep_input.cursor_blink = self.options.cursor_blink
        self.update_titles()
        self.load_recipes()

    # -- recipes and sessions -------------------------------------------------------------------
    @work(exclusive=True, group="catalog")
    async def load_recipes(self) -> None:
        opts = self.options
        self.infos = await asyncio.to_thread(load_catalog, opts.recipes_dirs, opts.cluster_path)
        recipes = self.query_one(RecipeList)
        slug = default_slug(self.infos, opts.recipe)
        recipes.show_recipes(self.infos, None)
        if not self.infos:
            where = ", ".join(str(d) for d in opts.recipes_dirs) or "no recipes folder"
            self.query_one(RecipePane).show_recipe(None)
            self.report("warning", f"no recipes found (looked in {where}); pass --recipes DIR")
            self.ready.set()
            return
        recipes.focus()
        if slug is not None:
            await self.open_recipe(slug)
        if self.session is not None:
            self.ranks_table.focus()  # ready for u, r and ↑↓; tab goes back to the recipes
        self.ready.set()

    def info(self, slug: str | None) -> RecipeInfo | None:
        return next((i for i in self.infos if i.slug == slug), None)

    @on(RecipeList.Highlighted)
    def _recipe_highlighted(self, event: RecipeList.Highlighted) -> None:
        self.highlighted = event.slug
        self.query_one(RecipePane).show_recipe(self.info(event.slug))

    @on(RecipeList.Activated)
    def _recipe_activated(self, event: RecipeList.Activated) -> None:
        if self.session is not None and self.session.slug == event.slug:
            self.ranks_table.focus()
            return
        self.activate(event.slug)

    def activate(self, slug: str) -> None:
        if self.busy:
            self.notify(f"{self.busy} is still running; switch recipes when it is done",
                        severity="warning", markup=False)
            return
        self._activate(slug)

    @work(exclusive=True, group="session")
    async def _activate(self, slug: str) -> None:
        await self.open_recipe(slug)
        if self.session is not None and self.session.slug == slug:
            self.ranks_table.focus()

    async def open_recipe(self, slug: str) -> None:
        """Close the open recipe (its containers keep running) and open ``slug``."""
        await self.close_session()
        info = self.info(slug)
        self.query_one(RecipeList).set_active(slug)
        self.highlighted = slug
        self.query_one(RecipePane).show_recipe(info)
        if self.options.remember:
            save_state({"recipe": slug})
        if info is None or not info.usable:
            self.store.reset(None, 0)
            self.ranks_table.setup([])
            self.logs.reset(None)
            self.checks_panel.show_checks(None)
            self.staging.display = False
            self.update_titles()
            if info is not None:
                count = len(info.errors) or len(info.problems)
                self.report("error", f"{slug} cannot run: {count} problem(s); see the recipe pane")
            return
        bridge = EventBridge(self, lambda: self.session.run_id if self.session is not None else None)
        session = Session(info, self.options.state_root, bridge)
        self.session, self.bridge = session, bridge
        self.details.clear()
        self.node_status.clear()
        nodes = [r.node for r in session.plan.ranks]
        self.store.reset(None, session.world)
        self.ranks_table.setup(nodes)
        self.staging.display = bool(session.plan.staging)
        if session.plan.staging:
            self.staging.setup([s.node for s in session.plan.staging])
        self.nodes_panel.setup(nodes)
        self._warned.clear()
        self.logs.reset(None)
        self.refresh_checks()
        self.update_titles()
        if not self.options.live:
            return
        try:
            tails = await session.open(self.options.window)
        except Exception as exc:
            self.report("error", f"{slug}: could not open on {session.plan.cluster_name}: {sentence(exc)}")
            return
        if session is not self.session:
            return
        for node, reason in session.unreachable.items():
            self.report("error", f"node {node} unreachable: {reason}")
        run = session.orch.run
        if run is not None:
            self.store.reset(run.id, session.world)
            for rank, lines in tails.items():
                self.store.lines(rank).extend(lines)
            self.logs.reset(run)
        for info_ in session.orch.ranks:
            self.ranks_table.set_restarts(info_.rank, info_.restarts)
        self.refresh_checks()
        session.follow()
        session.orch.telemetry(self.options.telemetry_interval, self.options.low_memory).start()
        self.update_titles()

    async def close_session(self) -> None:
        session, self.session = self.session, None
        if self.bridge is not None:
            self.bridge.closed = True
            self.bridge = None
        if session is not None:
            await session.close()

    def update_titles(self) -> None:
        table = self.ranks_table
        session = self.session
        highlighted = self.info(self.highlighted)
        if session is None and highlighted is not None and not highlighted.usable:
            idle = "This recipe cannot run: fix the problems in the recipe pane"
        elif session is None:
            idle = "Open a recipe: ↑↓ and enter in Recipes"
        elif session.orch.run is None:
            idle = "Not running · press u to launch every rank"
        else:
            idle = "Waiting for the first line…"
        self.logs.set_idle_text(idle)
        if session is None:
            table.border_title = "Ranks"
            table.border_subtitle = "open a recipe: ↑↓ enter in Recipes"
        else:
            cluster = session.plan.cluster_name
            table.border_title = (f"Ranks · {session.slug} on {cluster} · "
                                  f"{session.world} node{'s' if session.world != 1 else ''}")
            run = session.run_id
            state = f"{self.busy}…" if self.busy else (f"run {run}" if run else "not running")
            table.border_subtitle = f"{state} · ↑↓ select · r restart"
        self.update_detail()

    def update_detail(self) -> None:
        rank = self.ranks_table.selected_rank
        widget = self.query_one("#rank-detail", Static)
        if self.session is None or rank is None:
            widget.update("")
            return
        info = self.session.orch.ranks[rank]
        state = self.ranks_table.states.get(rank, "-")
        detail = self.details.get(rank, "")
        v = theme_colors(self.app.theme_variables)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"r{rank} ", "bold")
        text.append(f"{info.node.name} ")
        text.append(state, state_style(state, v))
        if info.container_id:
            text.append(f" · {info.container_id[:18]}", v.get("text-muted", ""))
        if info.exit_code is not None:
            text.append(f" · exit {info.exit_code}")
        if detail:
            text.append(f" · {detail}")
        widget.update(text)

    # -- backend messages -----------------------------------------------------------------------
    def on_log_lines(self, message: LogLines) -> None:
        session = self.session
        if session is None:
            return
        if message.run_id is not None and message.run_id != self.store.run_id:
            # a new run (up): its lines start over
            self.store.reset(message.run_id, session.world)
            self.logs.reset(session.orch.run)
            self.update_titles()
        added = self.store.add(message.rank, message.lines)
        if added:
            self.logs.lines_added(added)

    def on_rank_updated(self, message: RankUpdated) -> None:
        session = self.session
        if session is None or not 0 <= message.rank < session.world:
            return
        table = self.ranks_table
        previous = table.states.get(message.rank)
        table.set_state(message.rank, message.state)
        self.details[message.rank] = message.detail
        info = session.orch.ranks[message.rank]
        table.set_restarts(message.rank, info.restarts)
        table.set_started(message.rank, info.started)
        if message.state == "failed" and previous != "failed":
            self.report("error", f"rank {message.rank} ({info.node.name}) failed: {message.detail}",
                        toast=False)
            self._failed.append((message.rank, message.detail))
            if self._failure_timer is None:  # a TP group falls over at once: one toast for all
                self._failure_timer = self.set_timer(FAILURE_TOAST_DELAY, self._toast_failures)
        self.refresh_checks()
        self.update_titles()

    def _toast_failures(self) -> None:
        failed, self._failed = self._failed, []
        self._failure_timer = None
        if not failed:
            return
        first = self.session.orch.failures() if self.session is not None else []
        ranks = [r for r, _ in failed]
        # the first to fail is usually the cause; the others fell over with it
        rank = next((info.rank for info in first if info.rank in ranks), ranks[0])
        detail = next(d for r, d in failed if r == rank)
        reason = detail.split(": ", 1)[0] if detail else "failed"
        if len(failed) == 1:
            text = f"rank {rank} failed: {reason}"
        else:
            text = f"ranks {', '.join(map(str, sorted(ranks)))} failed; first rank {rank}: {reason}"
        self.notify(f"{text}  (e: events)", severity="error", timeout=8, markup=False)

    def on_checks_updated(self, message: ChecksUpdated) -> None:
        self.refresh_checks()

    def on_health_updated(self, message: HealthUpdated) -> None:
        if self.session is not None and 0 <= message.rank < self.session.world:
            self.ranks_table.set_health(message.rank, message.code)

    def on_node_updated(self, message: NodeUpdated) -> None:
        if self.node_status.get(message.node) == message.status:
            return
        before = self.node_status.get(message.node)
        self.node_status[message.node] = message.status
        if message.status != "connected":
            detail = f": {message.detail}" if message.detail else ""
            self.report("warning", f"node {message.node} {message.status}{detail}")
        elif before is not None:
            self.report("info", f"node {message.node} connected again")

    def on_node_sampled(self, message: NodeSampled) -> None:
        t = message.telemetry
        self.nodes_panel.update_node(t)
        for warning in t.warnings:  # once per warning, until it clears
            key = f"{t.node}: {warning.split(':')[0]}"
            if key not in self._warned:
                self._warned.add(key)
                self.report("warning", f"{t.node}: {warning}")
        current = {f"{t.node}: {w.split(':')[0]}" for w in t.warnings}
        self._warned -= {k for k in self._warned if k.startswith(f"{t.node}: ") and k not in current}

    def action_toggle_nodes(self) -> None:
        self._nodes_shown = not self.nodes_panel.display
        self.nodes_panel.display = self._nodes_shown

    def action_smoke(self) -> None:
        session = self._need_session()
        if session is None:
            return

        async def smoke() -> None:
            result = await session.orch.smoke()
            self.report("info", f"smoke ok: {result.sentence()}")
        self._start("smoke", smoke)

    def on_notice_posted(self, message: NoticePosted) -> None:
        self.report(message.level, message.text)

    def on_staging_updated(self, message: StagingUpdated) -> None:
        session = self.session
        if session is None:
            return
        p = message.progress
        self.staging.update_progress(p)
        got = self.staging.fraction(p.node)
        if got is None:
            return
        fraction, phase = got
        text = f"{bar(fraction)} {fraction:4.0%}" if phase not in ("failed", "start") else phase
        for rank in session.plan.ranks:
            if rank.node == p.node:
                self.ranks_table.set_staging(rank.rank, text)
        if p.phase == "failed":
            self.report("error", p.error or f"{p.node}: staging failed")

    def refresh_checks(self) -> None:
        session = self.session
        checks: BootChecks | None = session.orch.checks if session is not None else None
        self.checks_panel.show_checks(checks)
        if session is not None and checks is not None:
            running = session.orch.run is not None or not self.options.live
            for rank in range(session.world):
                self.ranks_table.set_checks(rank, checks.rank_summary(rank) if running else {})

    # -- widget messages ------------------------------------------------------------------------
    @on(RankTable.Selected)
    def _rank_selected(self, event: RankTable.Selected) -> None:
        """The selected rank drives the log: a one-rank view follows the selection."""
        if self.logs.shown is not None and self.logs.shown != event.rank:
            self.logs.show_ranks(event.rank)
        self.update_detail()

    @on(DataTable.RowSelected, "#ranks")
    def _rank_chosen(self, event: DataTable.RowSelected) -> None:
        """Enter on a rank: that rank's log only."""
        if event.row_key.value is not None:
            self.logs.show_ranks(int(event.row_key.value))
            self.update_detail()

    @on(ChecksPanel.Jump)
    def _jump(self, event: ChecksPanel.Jump) -> None:
        if not self.logs.jump_to(event.rank, event.line_no):
            self.notify(f"line {event.line_no} of rank {event.rank} is not in this run's log",
                        severity="warning", markup=False)

    # -- reporting ------------------------------------------------------------------------------
    def report(self, level: str, text: str, short: str | None = None, toast: bool = True) -> None:
        """A notice for the operator: a toast now (``short``, when given), and the full text in
        the events view (e)."""
        when = time.strftime("%H:%M:%S", time.localtime(self.options.wall_clock()))
        self.events.append(EventRecord(when, level, text))
        del self.events[:-MAX_EVENTS]
        if toast:
            self._toast(level, short or text, text)

    def _toast(self, level: str, toast: str, text: str) -> None:
        if len(toast) > TOAST_CHARS:
            toast = toast[:TOAST_CHARS - 1] + "…"
        if toast != text:
            toast += "  (e: events)"
        self.notify(toast, severity=SEVERITY.get(level, "information"),  # type: ignore[arg-type]
                    timeout=8 if level == "error" else 4, markup=False)

    # -- actions --------------------------------------------------------------------------------
    def _need_session(self) -> Session | None:
        if self.session is None:
            self.notify("Open a recipe first (Recipes: ↑↓ then enter)", severity="warning", markup=False)
        return self.session

    def _start(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        if self.busy:
            self.notify(f"{self.busy} is still running", severity="warning", markup=False)
            return
        if not self.options.live:
            self.notify(f"{name}: this console does not drive a cluster", severity="warning", markup=False)
            return
        self.busy = name
        self.update_titles()
        self._run_job(name, job)

    @work(group="actions", exit_on_error=False)
    async def _run_job(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        try:
            await job()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.report("error", f"{name}: {sentence(exc)}")
        finally:
            self.busy = None
            self.update_titles()

    def action_up(self) -> None:
        session = self._need_session()
        if session is None:
            return

        async def up() -> None:
            unreachable = await session.orch.connect()
            for node, reason in unreachable.items():
                self.report("error", f"node {node} unreachable: {reason}")
            if unreachable:
                return
            await session.orch.up()
            session.attached = True
            failed = [r.rank for r in session.orch.ranks if r.state == "failed"]
            if not failed:
                self.report("info", f"{session.slug}: launched {session.world} rank(s)")
        self._start("up", up)

    def action_stage(self) -> None:
        session = self._need_session()
        if session is None:
            return
        if not session.plan.staging:
            self.notify(f"{session.slug} has no [[staging]] jobs", severity="information", markup=False)
            return

        async def stage() -> None:
            await session.orch.connect()
            results = await session.orch.stage()
            bad = [r for r in results if not r.ok]
            if bad:
                for r in bad:
                    self.report("error", r.error or f"{r.node}: staging failed")
            else:
                self.report("info", f"staging done on {len(results)} node(s)")
        self._start("stage", stage)

    def action_restart(self) -> None:
        session = self._need_session()
        rank = self.ranks_table.selected_rank
        if session is None or rank is None:
            return
        if not has_container(session.orch.ranks[rank]):
            self.notify(f"Rank {rank} has no container to restart: press u to launch the recipe",
                        severity="warning", markup=False)
            return
        node = session.plan.ranks[rank].node

        def chosen(choice: str | None) -> None:
            if choice == "rank":
                self._start(f"restart r{rank}", lambda: self._restart_rank(session, rank))
            elif choice == "group":
                self._start("restart group", lambda: self._restart_group(session))

        self.app.push_screen(RestartScreen(rank, node, session.world, session.tp), chosen)

    async def _restart_rank(self, session: Session, rank: int) -> None:
        await session.orch.restart(rank)
        self.report("info", f"rank {rank} replaced")

    async def _restart_group(self, session: Session) -> None:
        await session.orch.down()
        await session.orch.up()
        session.attached = True
        self.report("info", f"{session.slug}: every rank launched again")

    def action_down(self) -> None:
        session = self._need_session()
        if session is None:
            return
        if not any(has_container(info) for info in session.orch.ranks):
            self.notify(f"Nothing of {session.slug} is running", severity="information", markup=False)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._start("down", lambda: self._down(session))

        body = (f"Stop and remove every rank's container of {session.slug} on "
                f"{session.plan.cluster_name} ({session.world} rank(s)).\n\n"
                "The run's logs stay on disk; up starts a new run.")
        self.app.push_screen(ConfirmScreen(f"down {session.slug}?", body, "Down"), answered)

    async def _down(self, session: Session) -> None:
        await session.orch.down()
        self.report("info", f"{session.slug}: every rank stopped and removed")

    def action_doctor(self) -> None:
        session = self._need_session()
        if session is None:
            return
        orch = session.orch

        async def run() -> list[Finding]:
            if not self.options.live:
                return []
            return await doctor(orch.plan, orch.nodes, orch.transports, orch.runtimes)
        self.app.push_screen(DoctorScreen(f"doctor · {session.slug} on {orch.cluster.name}", run))

    def action_plan(self) -> None:
        info = self.info(self.highlighted) or (self.session.info if self.session else None)
        if info is None or info.recipe is None or info.cluster is None:
            self.notify("No plan: the recipe cannot be loaded (see the recipe pane)", severity="warning",
                        markup=False)
            return
        if info.errors:
            self.notify(f"No plan: {info.slug} has {len(info.errors)} error(s)", severity="warning",
                        markup=False)
            return
        plan = self.session.plan if self.session and self.session.info is info else \
            build_plan(info.recipe, info.cluster)
        self.app.push_screen(PlanScreen(plan, len(info.recipe.spec.args)))

    def action_grep(self) -> None:
        self.logs.open_grep()

    def action_next_match(self) -> None:
        self._step(True)

    def action_prev_match(self) -> None:
        self._step(False)

    def _step(self, forward: bool) -> None:
        if not self.logs.line_filter.active:
            self.notify("Grep first: press / and type a regex", severity="information", timeout=3,
                        markup=False)
            return
        if not self.logs.step_match(forward, self.ranks_table.selected_rank):
            self.notify("No more matches " + ("below" if forward else "above"), timeout=2, markup=False)
        self.logs.update_bar()

    def action_show_rank(self, rank: int) -> None:
        if rank < 0:
            self.logs.show_ranks(None)
            return
        if rank >= self.store.world:
            self.notify(f"There is no rank {rank}", severity="warning", timeout=3, markup=False)
            return
        self.ranks_table.select(rank)
        self.logs.show_ranks(rank)

    def action_escape(self) -> None:
        logs = self.logs
        if logs.pending_filter.text or logs.line_filter.text:
            logs.clear_grep()
        elif logs.excerpt is not None:
            logs.toggle_follow()  # leaves the excerpt for the live log
        elif not all(view.follow for view in logs.views()):
            logs.follow_all()

    async def action_toggle_grid(self) -> None:
        await self.logs.toggle_grid(self.ranks_table.nodes)

    def action_toggle_follow(self) -> None:
        self.logs.toggle_follow()

    def action_toggle_wrap(self) -> None:
        self.logs.toggle_wrap()

    def action_toggle_timestamps(self) -> None:
        self.logs.toggle_timestamps()

    def action_checks(self) -> None:
        panel = self.checks_panel
        if not panel.display:
            panel.display = True
            panel.focus()
        elif not panel.has_focus:
            panel.focus()
        else:
            panel.display = False
            self.logs.focus_view()

    def action_add_check(self) -> None:
        session = self._need_session()
        if session is None:
            return

        def added(new: NewCheck | None) -> None:
            if new is not None:
                self.add_check(session, new)

        self.app.push_screen(AddCheckScreen(session.world), added)

    @work(group="checks", exit_on_error=False)
    async def add_check(self, session: Session, new: NewCheck) -> Check | None:
        """Add a check; evaluate it on everything already captured, then live (the Orchestrator
        feeds every check as lines arrive)."""
        checks = session.orch.checks
        try:
            check = checks.add("must_show", new.pattern, new.ranks, added=True)
        except ValueError as exc:
            self.report("error", f"check not added: {exc}")
            return None
        run = session.orch.run
        if run is not None:
            for rank in range(session.world):
                lines = await asyncio.to_thread(lines_since_restart, run, rank)
                if session.orch.checks is not checks:
                    break  # a new run started meanwhile; its checks start over
                checks.feed(rank, lines, only=check)
        self.refresh_checks()
        state = checks.overall(check)
        matched = sorted({st.match.rank for (cid, _r), st in checks.status.items()
                          if cid == check.id and st.match is not None})
        where = f" (seen on rank{'s' if len(matched) > 1 else ''} {', '.join(map(str, matched))})" \
            if matched else ""
        self.report("info", f"check added: {new.pattern!r} is {state}{where}")
        self.checks_panel.display = True
        return check

    def action_events(self) -> None:
        self.app.push_screen(EventsScreen(self.events))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_next_theme(self) -> None:
        next_theme = getattr(self.app, "next_theme", None)
        if callable(next_theme):
            next_theme()

    async def action_quit(self) -> None:
        await self.close_session()
        self.app.exit()

    async def on_unmount(self) -> None:
        await self.close_session()
