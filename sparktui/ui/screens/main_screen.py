"""The main screen: recipes on the left; ranks, staging, logs and boot checks on the right.

It lays the widgets out and routes the backend's events: each event updates ``ConsoleState``
(what outlives one event) or the log store, and the widgets observe what the screen sets on
them (the rank table its snapshots, the log panel its model, the checks panel its checks).
Every long action runs as a worker of the screen (``Jobs``, which it owns) so it never waits;
the keys that only change the log view act on the log panel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer

from sparktui.backend.events import (
    AllocationChanged,
    CanaryChanged,
    ChecksChanged,
    ImageSyncProgress,
    LogBatch,
    MetricsChanged,
    NodeChanged,
    NodeTelemetry,
    Notice,
    RankChanged,
    RunStarted,
    StagingProgress,
    StallChanged,
)
from sparktui.catalog import RecipeInfo, default_slug, load_catalog
from sparktui.config import cluster_plan
from sparktui.core.canary import CanaryRecord
from sparktui.core.controls import visible
from sparktui.core.engines import engine
from sparktui.core.errors import SetupError, sentence
from sparktui.core.runstore import ts_epoch
from sparktui.core.stall import last_progress
from sparktui.ui.bridge import EventBridge
from sparktui.ui.console_state import ConsoleState
from sparktui.ui.formatting import bar
from sparktui.ui.keys import bindings
from sparktui.ui.logstore import LogStore
from sparktui.ui.messages import BackendEvent
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.outside import content
from sparktui.ui.screens.add_check_screen import AddCheckScreen, NewCheck
from sparktui.ui.screens.confirm_screen import ConfirmScreen
from sparktui.ui.screens.doctor_screen import DoctorScreen
from sparktui.ui.screens.dump_screen import DumpScreen
from sparktui.ui.screens.events_screen import EventsScreen
from sparktui.ui.screens.help_screen import HelpScreen
from sparktui.ui.screens.jobs import Jobs
from sparktui.ui.screens.plan_screen import PlanScreen
from sparktui.ui.screens.pulse_screen import PulseScreen
from sparktui.ui.screens.restart_screen import RestartChoice, RestartScreen
from sparktui.ui.session import Session
from sparktui.ui.settings import save_state
from sparktui.ui.widgets.checks_panel import ChecksPanel
from sparktui.ui.widgets.log_panel import LogPanel
from sparktui.ui.widgets.nodes_panel import NodesPanel
from sparktui.ui.widgets.rank_detail import RankDetail
from sparktui.ui.widgets.rank_table import RankTable
from sparktui.ui.widgets.recipe_list import RecipeList
from sparktui.ui.widgets.recipe_pane import RecipePane
from sparktui.ui.widgets.staging_panel import StagingPanel

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from sparktui.backend.doctor import Finding
    from sparktui.backend.imagesync import SyncReport
    from sparktui.core.runstore import Run
    from sparktui.ui.export import ConsoleExport

NARROW = 110  # below this many columns: fewer rank columns, no recipe pane, a compact footer
TINY = 60  # below this: no recipes column either (the palette opens recipes): ranks and logs
SHORT = 32  # below this many rows (or when narrow) the nodes panel starts hidden: logs come first
TOAST_CHARS = 120
FAILURE_TOAST_DELAY = 0.6
CANARY_AGE_S = 5.0  # how often the canary's age in the ranks panel's subtitle moves on
EXPORT_REFRESH_S = 1.0  # how often the state sparktui --metrics serves is rebuilt
SEVERITY: dict[str, SeverityLevel] = {"info": "information", "warning": "warning", "error": "error"}


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = bindings()
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [  # noqa: RUF012
        (0, "-tiny"), (TINY, "-narrow"), (NARROW, "-wide")]
    VERTICAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-short"), (SHORT, "-tall")]  # noqa: RUF012

    busy: reactive[str | None] = reactive(None, init=False)
    """The long action running now (up, stage, ...); one at a time."""
    canary: reactive[CanaryRecord | None] = reactive(None, init=False)
    """The liveness canary's last completion (``[liveness]``): its latency and age are in the
    ranks panel's subtitle."""

    def __init__(self, options: ConsoleOptions) -> None:
        super().__init__(id="main")
        self.options = options
        self.store = LogStore(0, options.window)
        self.state = ConsoleState(options.wall_clock)
        self.infos: list[RecipeInfo] = []
        self.session: Session | None = None
        self.highlighted: str | None = None
        self._nodes_shown: bool | None = None  # the operator's choice (m), once made
        self.ready = asyncio.Event()  # the first recipe is open (tests wait on it)
        self._opening = asyncio.Lock()
        self.jobs = Jobs(self)
        self.export: ConsoleExport | None = None  # sparktui --metrics

    # -- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="side"):
                yield RecipeList(id="recipes")
                yield RecipePane(id="recipe")
            with Vertical(id="work"):
                yield RankTable(self.options.clock, self.options.wall_clock, id="ranks")
                yield RankDetail(id="rank-detail")
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
        self.ranks_table.compact = narrow
        footer = self.query_one(Footer)
        footer.compact = narrow
        if footer.show_command_palette == narrow:  # Textual's footer composes its keys once:
            footer.show_command_palette = not narrow  # a change after that shows only when
            footer.refresh(recompose=True)  # it composes them again

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
        self.set_interval(CANARY_AGE_S, self._canary_aged)
        self._start_export()
        self.load_recipes()

    def _start_export(self) -> None:
        """``sparktui --metrics``: the open recipe's state for Prometheus while the console runs."""
        address = self.options.metrics
        if address is None or not self.options.live:
            return
        from sparktui.ui.export import ConsoleExport  # the Prometheus client: only when asked

        try:
            self.export = ConsoleExport(*address)
        except OSError as exc:
            self.report("error", f"--metrics {address[0]}:{address[1]}: cannot listen there: "
                                 f"{exc.strerror or exc}")
            return
        self.report("info", f"serving the open recipe's state for Prometheus on {self.export.where}")
        self.set_interval(EXPORT_REFRESH_S, self.export.refresh)

    def watch_busy(self) -> None:
        self.update_titles()

    def watch_canary(self) -> None:
        self.update_titles()

    def _canary_aged(self) -> None:
        if self.canary is not None:  # its age in the subtitle moves on
            self.update_titles()

    # -- recipes and sessions -------------------------------------------------------------------
    @work(exclusive=True, group="catalog")
    async def load_recipes(self) -> None:
        opts = self.options
        self.infos = await asyncio.to_thread(load_catalog, opts.recipes_dirs, opts.cluster_path)
        recipes = self.query_one(RecipeList)
        slug = default_slug(self.infos, opts.recipe)
        recipes.infos = tuple(self.infos)
        for info in self.infos:
            if not info.name_ok:
                self.report("warning", info.name_sentence(), toast=False)
        if not self.infos:
            where = ", ".join(str(d) for d in opts.recipes_dirs) or "no recipes folder"
            self.query_one(RecipePane).info = None
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
        self.query_one(RecipePane).info = self.info(event.slug)

    @on(RecipeList.Activated)
    def _recipe_activated(self, event: RecipeList.Activated) -> None:
        self.activate(event.slug)

    def activate(self, slug: str) -> None:
        """Open ``slug``; the recipe already open stays as it is (its view and state kept). A
        name that cannot be a recipe's is never opened (nothing offers it: this is the last
        guard)."""
        info = self.info(slug)
        if info is None or not info.name_ok:
            return
        if self.session is not None and self.session.slug == slug:
            self.ranks_table.focus()
            return
        if self.busy:
            self.notify(f"{self.busy} is still running; switch recipes when it is done",
                        severity="warning", markup=False)
            return
        self._activate(slug)

    @work(exclusive=True, group="session")
    async def _activate(self, slug: str) -> None:
        await self.open_recipe(slug)
        focused = self.app.focused
        if self.session is not None and self.session.slug == slug and (
                focused is None or isinstance(focused, RecipeList)):
            self.ranks_table.focus()  # not while the operator types elsewhere (a grep)

    async def open_recipe(self, slug: str) -> None:
        """Close the open recipe (its containers keep running) and open ``slug``. One at a
        time: the first load and a recipe chosen meanwhile must not interleave their widgets."""
        async with self._opening:
            await self._open_recipe(slug)

    async def _open_recipe(self, slug: str) -> None:
        info = self.info(slug)
        if info is not None and not info.name_ok:
            return
        await self.close_session()
        self.query_one(RecipeList).active = slug
        self.highlighted = slug
        self.query_one(RecipePane).info = info
        if self.options.remember:
            save_state({"recipe": slug})
        usable = info is not None and info.usable
        try:
            session = Session(info, self.options.state_root, EventBridge(self),
                              self.options.health_interval) if info is not None and usable else None
        except SetupError as exc:  # the plan key: the recipe opens without its containers
            self.report("error", str(exc))
            session = None
        self.session = session
        if self.export is not None:
            self.export.follow(session.orch if session is not None else None)
        self.logs.grep = session.orch if session is not None else None
        self.state.open(session.orch.checks.snapshot() if session is not None else None)
        nodes = [r.node for r in session.plan.ranks] if session is not None else []
        self.store.reset(None, len(nodes))
        table = self.ranks_table
        table.snapshots, table.checks, table.staging = (), (), ()
        table.nodes = tuple(nodes)
        self.nodes_panel.setup(nodes)
        staged = session is not None and bool(session.plan.staging)
        self.staging.display = staged
        if session is not None and staged:
            await self.staging.setup([s.node for s in session.plan.staging])
        self.logs.reset(None)
        self.refresh_checks()
        self.update_titles()
        if info is not None and not usable:
            count = len(info.errors) or len(info.problems)
            self.report("error", f"{slug} cannot run: {count} problem(s); see the recipe pane")
        if session is None or not self.options.live:
            return
        try:
            run, tails = await session.open(self.options.window)
        except Exception as exc:
            self.report("error", f"{slug}: could not open on {session.plan.cluster_name}: {sentence(exc)}")
            return
        if session is not self.session:
            return
        for node, reason in session.unreachable.items():
            self.report("error", f"node {node} unreachable: {reason}")
        if run is not None:
            self._show_run(run)
            for rank, lines in tails.items():
                self.store.lines(rank).extend(lines)
            self.logs.reset(run)
        session.follow()
        session.orch.telemetry(self.options.telemetry_interval, self.options.low_memory).start()

    async def close_session(self) -> None:
        session, self.session = self.session, None
        if self.export is not None:
            self.export.follow(None)
        if session is not None:
            await session.close()

    def _show_run(self, run: Run) -> bool:
        """The run on screen from now on; True when it is another run (its lines start over)."""
        if not self.state.run_started(run):
            return False
        self.store.reset(run.id, self.store.world)
        self.logs.reset(run)
        self.refresh_checks()
        self.update_titles()
        return True

    def update_titles(self) -> None:
        table = self.ranks_table
        session = self.session
        highlighted = self.info(self.highlighted)
        if session is None and highlighted is not None and not highlighted.usable:
            idle = "This recipe cannot run: fix the problems in the recipe pane"
        elif session is None:
            idle = "Open a recipe: ↑↓ and enter in Recipes"
        elif self.state.run is None:
            idle = "Not running · press u to launch every rank"
        else:
            idle = "Waiting for the first line…"
        self.logs.model.set(idle_text=idle)
        if session is None:
            table.set_titles("Ranks", "open a recipe: ↑↓ enter in Recipes")
        else:
            cluster = session.plan.cluster_name
            run = self.state.run_id
            state = f"{self.busy}…" if self.busy else (f"run {run}" if run else "not running")
            canary = (f"{self.canary.sentence(self.options.wall_clock(), brief=True)} · "
                      if self.canary is not None else "")
            table.set_titles(content(f"Ranks · {session.slug} on {cluster} · "
                                     f"{session.world} node{'s' if session.world != 1 else ''}"),
                             content(f"{state} · {canary}↑↓ select · r restart"))
        self.update_detail()

    def update_detail(self) -> None:
        rank = self.ranks_table.selected_rank
        detail = self.query_one(RankDetail)
        if self.session is None or rank is None:
            detail.snap, detail.rank, detail.node = None, None, ""
        else:
            detail.snap, detail.rank, detail.node = (self.state.ranks.get(rank), rank,
                                                     self.ranks_table.nodes[rank])

    def refresh_checks(self) -> None:
        checks = self.state.checks
        self.checks_panel.checks = checks
        if self.session is not None:
            self.ranks_table.checks = self.state.check_summaries(self.session.world, self.options.live)

    # -- backend events -------------------------------------------------------------------------
    def on_backend_event(self, message: BackendEvent) -> None:
        if self.session is None:
            return
        match message.event:
            case LogBatch() as event:
                self._log_batch(event)
            case RankChanged() as event:
                self._rank_changed(event)
            case RunStarted() as event:
                self._run_started(event)
            case ChecksChanged() as event:
                self._checks_changed(event)
            case NodeChanged() as event:
                self._node_changed(event)
            case NodeTelemetry() as event:
                self._node_sampled(event)
            case AllocationChanged() as event:
                self.nodes_panel.allocation = event.text
            case StallChanged() as event:
                self.ranks_table.stalled = event.stall.ranks if event.stall is not None else ()
            case CanaryChanged() as event:
                self.canary = event.record
            case MetricsChanged():
                if isinstance(self.app.screen, PulseScreen):
                    self.app.screen.repaint()
            case Notice() as event:
                self._notice(event)
            case StagingProgress() as event:
                self._staging(event)
            case ImageSyncProgress() as event:
                self._image_sync(event)
            case _:
                pass  # an event the console does not show

    def _run_started(self, event: RunStarted) -> None:
        self.ranks_table.last_line_at.clear()
        self.ranks_table.stalled = ()
        self.canary = None  # another run's
        self._show_run(event.run)

    def _log_batch(self, event: LogBatch) -> None:
        if self.store.run_id is not None and event.run_id != self.store.run_id:
            return  # a follower of an earlier run still draining
        added = self.store.add(event.rank, event.lines)
        if event.lines and self.session is not None:  # the quiet column: as the backend counts
            said = last_progress(event.lines, engine(self.session.plan.engine).request_line)
            at = ts_epoch(said[0]) if said is not None else None
            if at is not None:
                self.ranks_table.last_line_at[event.rank] = at
        if added:
            self.logs.lines_added(added)

    def _rank_changed(self, event: RankChanged) -> None:
        snap = event.rank
        if not 0 <= snap.rank < self.store.world:
            return
        if snap.state == "creating":  # a new launch of the rank: its last line was the last's
            self.ranks_table.last_line_at.pop(snap.rank, None)
        elif snap.last_line_at is not None:  # what an attach read from the run's files
            seen = self.ranks_table.last_line_at.get(snap.rank, 0.0)
            self.ranks_table.last_line_at[snap.rank] = max(seen, snap.last_line_at)
        failure = self.state.rank_changed(snap)
        self.ranks_table.snapshots = self.state.snapshots(self.store.world)
        if failure is not None:
            self.report("error", failure, toast=False)
            self.set_timer(FAILURE_TOAST_DELAY, self._toast_failures)  # the group falls at once
        self.update_titles()

    def _toast_failures(self) -> None:
        text = self.state.take_failures()
        if text is not None:  # ranks' details: a container's words
            self.notify(f"{visible(text)}  (e: events)", severity="error", timeout=8, markup=False)

    def _checks_changed(self, event: ChecksChanged) -> None:
        self.state.checks = event.checks
        self.refresh_checks()

    def _node_changed(self, event: NodeChanged) -> None:
        said = self.state.node_changed(event)
        if said is not None:
            self.report(*said)

    def _node_sampled(self, event: NodeTelemetry) -> None:
        self.nodes_panel.sample = event
        for text in self.state.new_warnings(event):
            self.report("warning", text)

    def _notice(self, event: Notice) -> None:
        self.report(event.level, event.text)

    def _image_sync(self, p: ImageSyncProgress) -> None:
        """A line per node in the doctor, while it is open (the job toasts the outcome)."""
        screen = self.app.screen
        if isinstance(screen, DoctorScreen):
            screen.sync_progress(p)

    def _staging(self, p: StagingProgress) -> None:
        session = self.session
        assert session is not None
        self.staging.progress = p
        got = self.staging.fraction(p.node)
        if got is None:
            return
        fraction, phase = got
        text = f"{bar(fraction)} {fraction:4.0%}" if phase not in ("failed", "start") else phase
        staging = list(self.ranks_table.staging) or [""] * session.world
        for rank in session.plan.ranks:
            if rank.node == p.node:
                staging[rank.rank] = text
        self.ranks_table.staging = tuple(staging)
        # a failure is reported once, by what asked for the staging (s, or up's notices)

    # -- widget messages ------------------------------------------------------------------------
    @on(RankTable.Selected)
    def _rank_selected(self, event: RankTable.Selected) -> None:
        """The selected rank drives the log: a one-rank view follows the selection, and side by
        side beyond the grid its tab comes to the front."""
        if self.logs.model.shown is not None and self.logs.model.shown != event.rank:
            self.logs.show_ranks(event.rank)
        elif self.logs.model.grid:
            self.logs.panes.show(event.rank)
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
        the events view (e). Its text may quote a node or a container (an engine's fatal line):
        control characters written out (``core.controls``), never sent to the terminal."""
        text, short = visible(text), (visible(short) if short is not None else None)
        self.state.note(level, text)
        if not toast:
            return
        toast_text = short or text
        if len(toast_text) > TOAST_CHARS:
            toast_text = toast_text[:TOAST_CHARS - 1] + "…"
        if toast_text != text:
            toast_text += "  (e: events)"
        self.notify(toast_text, severity=SEVERITY.get(level, "information"),
                    timeout=8 if level == "error" else 4, markup=False)

    # -- the log keys: what the log panel shows, and the panels beside it ------------------------
    def action_grep(self) -> None:
        self.logs.open_grep()

    def action_next_match(self) -> None:
        self.logs.step(True, self.ranks_table.selected_rank)

    def action_prev_match(self) -> None:
        self.logs.step(False, self.ranks_table.selected_rank)

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
        self.logs.escape()

    async def action_toggle_grid(self) -> None:
        await self.logs.toggle_grid(list(self.ranks_table.nodes), self.ranks_table.selected_rank)

    def action_toggle_follow(self) -> None:
        self.logs.toggle_follow()

    def action_toggle_wrap(self) -> None:
        self.logs.toggle_wrap()

    def action_toggle_timestamps(self) -> None:
        self.logs.toggle_timestamps()

    def action_toggle_probes(self) -> None:
        self.logs.toggle_probes()

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

    def action_toggle_nodes(self) -> None:
        self._nodes_shown = not self.nodes_panel.display
        self.nodes_panel.display = self._nodes_shown

    # -- long actions (``Jobs``) ----------------------------------------------------------------
    def action_up(self) -> None:
        self.jobs.up()

    def action_stage(self) -> None:
        self.jobs.stage()

    def action_smoke(self) -> None:
        self.jobs.smoke()

    # -- actions that ask first -----------------------------------------------------------------
    def action_restart(self) -> None:
        session = self.jobs.need_session()
        rank = self.ranks_table.selected_rank
        if session is None or rank is None:
            return
        if not self.state.has_container(rank):
            self.notify(f"Rank {rank} has no container to restart: press u to launch the recipe",
                        severity="warning", markup=False)
            return

        def chosen(choice: RestartChoice | None) -> None:
            if choice == "rank":
                self.jobs.start(f"restart r{rank}", lambda: self.jobs.restart_rank(session, rank))
            elif choice == "group":
                self.jobs.start("restart group", lambda: self.jobs.restart_group(session))

        node = session.plan.ranks[rank].node
        self.app.push_screen(RestartScreen(rank, node, session.world, session.tp), chosen)

    def action_down(self) -> None:
        session = self.jobs.need_session()
        if session is None:
            return
        if not any(self.state.has_container(r) for r in range(session.world)):
            self.notify(f"Nothing of {session.slug} is running", severity="information", markup=False)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.jobs.start("down", lambda: self.jobs.down(session))

        body = (f"Stop and remove every rank's container of {session.slug} on "
                f"{session.plan.cluster_name} ({session.world} rank(s)).\n\n"
                "The run's logs stay on disk; up starts a new run.")
        self.app.push_screen(ConfirmScreen(f"down {session.slug}?", body, "Down"), answered)

    def action_doctor(self) -> None:
        session = self.jobs.need_session()
        if session is None:
            return
        live = self.options.live

        async def run() -> list[Finding]:
            return await session.orch.doctor() if live else []
        def sync(done: Callable[[SyncReport | None], None]) -> bool:
            return self.jobs.image_sync(session, done)
        title = f"doctor · {session.slug} on {session.plan.cluster_name}"
        self.app.push_screen(DoctorScreen(title, run, sync if live and session.orch.can_sync_images
                                          else None))

    def action_pulse(self) -> None:
        session = self.jobs.need_session()
        if session is None:
            return
        scraper = session.orch.metrics
        if scraper.interval is None:
            self.notify(f"No pulse: [metrics] is off in {session.slug}", severity="warning",
                        markup=False)
            return
        if not scraper.ranks:
            self.notify("No pulse: no rank of this engine serves metrics", severity="warning",
                        markup=False)
            return
        nodes = {i.rank: i.node.name for i in session.orch.ranks}
        self.app.push_screen(PulseScreen(f"pulse · {session.slug} on {session.plan.cluster_name}",
                                         scraper, nodes))

    def action_dump(self) -> None:
        session = self.jobs.need_session()
        if session is None:
            return
        title = f"dump · {session.slug} on {session.plan.cluster_name}"
        self.app.push_screen(DumpScreen(title, session.orch.dump))

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
        try:
            plan = self.session.plan if self.session and self.session.info is info else \
                cluster_plan(info.recipe, info.cluster, self.options.state_root)
        except SetupError as exc:
            self.notify(f"No plan: {exc}", severity="error", markup=False)
            return
        self.app.push_screen(PlanScreen(plan, len(info.recipe.spec.args)))

    def action_add_check(self) -> None:
        session = self.jobs.need_session()
        if session is None:
            return

        def added(new: NewCheck | None) -> None:
            if new is not None:
                self.jobs.add_check(session, new)

        self.app.push_screen(AddCheckScreen(session.world), added)

    def action_events(self) -> None:
        self.app.push_screen(EventsScreen(self.state.notices))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_next_theme(self) -> None:
        next_theme = getattr(self.app, "next_theme", None)
        if callable(next_theme):
            next_theme()

    async def on_unmount(self) -> None:
        await self.close_session()
        if self.export is not None:
            await self.export.close()
