"""The console's long actions: each runs as a worker of the main screen, one at a time, while
the screen stays live (its ``busy`` names the one running). The screen owns a ``Jobs``, opens
the dialogs that ask first and hands the answer to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from sparktui.backend.imagesync import ImageMismatch, SyncReport, short
from sparktui.core.errors import sentence
from sparktui.ui.screens.add_check_screen import NewCheck
from sparktui.ui.session import Session

if TYPE_CHECKING:
    from sparktui.ui.console_state import ConsoleState
    from sparktui.ui.options import ConsoleOptions
    from sparktui.ui.widgets.checks_panel import ChecksPanel


class Host(Protocol):
    """What the jobs use of the screen that owns them (``MainScreen``, which imports this
    module: a protocol here, not an import back)."""

    busy: str | None
    session: Session | None
    options: ConsoleOptions
    state: ConsoleState

    @property
    def checks_panel(self) -> ChecksPanel: ...
    def report(self, level: str, text: str, short: str | None = None, toast: bool = True) -> None: ...
    def notify(self, *args: Any, **kwargs: Any) -> None: ...
    def run_worker(self, *args: Any, **kwargs: Any) -> Any: ...
    def refresh_checks(self) -> None: ...


class Jobs:
    """The main screen's long actions; the screen reports what they say."""

    def __init__(self, screen: Host) -> None:
        self.screen = screen
        self.report = screen.report
        self.notify = screen.notify

    def need_session(self) -> Session | None:
        if self.screen.session is None:
            self.notify("Open a recipe first (Recipes: ↑↓ then enter)", severity="warning", markup=False)
        return self.screen.session

    def start(self, name: str, job: Callable[[], Awaitable[None]]) -> bool:
        """Run ``job`` unless another action runs; False (and a toast saying why) when not."""
        screen = self.screen
        if screen.busy:
            self.notify(f"{screen.busy} is still running", severity="warning", markup=False)
            return False
        if not screen.options.live:
            self.notify(f"{name}: this console does not drive a cluster", severity="warning", markup=False)
            return False
        screen.busy = name
        screen.run_worker(self._run(name, job), group="actions", exit_on_error=False)
        return True

    async def _run(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        try:
            await job()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.report("error", f"{name}: {sentence(exc)}")
        finally:
            self.screen.busy = None

    def up(self) -> None:
        session = self.need_session()
        if session is None:
            return

        async def up() -> None:
            unreachable = await session.orch.connect()
            for node, reason in unreachable.items():
                self.report("error", f"node {node} unreachable: {reason}")
            if unreachable:
                return
            try:
                await session.orch.up()
            except ImageMismatch as exc:
                self.report("error", f"up: {exc} (here: d, then s)")
                return
            session.attached = True
            if not session.orch.failures():
                self.report("info", f"{session.slug}: launched {session.world} rank(s)")
        self.start("up", up)

    def stage(self) -> None:
        session = self.need_session()
        if session is None:
            return
        if not session.plan.staging:
            self.notify(f"{session.slug} has no [[staging]] jobs", severity="information", markup=False)
            return

        async def stage() -> None:
            await session.orch.connect()
            results = await session.orch.stage()
            bad = [r for r in results if not r.ok]
            for r in bad:
                self.report("error", r.error or f"{r.node}: staging failed")
            if not bad:
                self.report("info", f"staging done on {len(results)} node(s)")
        self.start("stage", stage)

    def smoke(self) -> None:
        session = self.need_session()
        if session is None:
            return

        async def smoke() -> None:
            result = await session.orch.smoke()
            self.report("info", f"smoke ok: {result.sentence()}")
        self.start("smoke", smoke)

    def image_sync(self, session: Session, done: Callable[[SyncReport | None], None]) -> bool:
        """Copy the recipe's image to the nodes that lack it or hold another build (the doctor's
        sync key); ``done`` gets the report (None when the sync itself failed). False when
        another action runs."""
        async def sync() -> None:
            try:
                await session.orch.connect()
                report = await session.orch.image_sync()
            except BaseException:
                done(None)
                raise
            done(report)
            for r in report.results:
                if r.action == "failed":
                    self.report("error", f"image sync: {r.node}: {r.error}")
            if report.ok:
                where = ", ".join(report.copied) or "no node (every node had it)"
                self.report("info", f"image sync: copied to {where}; every node has "
                                    f"{report.image} {short(report.source_id)}")
        return self.start("image sync", sync)

    async def restart_rank(self, session: Session, rank: int) -> None:
        await session.orch.restart(rank)
        self.report("info", f"rank {rank} replaced")

    async def restart_group(self, session: Session) -> None:
        await session.orch.restart_group()
        self.report("info", f"{session.slug}: every rank replaced, same run")

    async def down(self, session: Session) -> None:
        await session.orch.down()
        self.report("info", f"{session.slug}: every rank stopped and removed")

    def add_check(self, session: Session, new: NewCheck) -> None:
        """Add a check; the Orchestrator evaluates it on everything already captured, then live."""
        self.screen.run_worker(self._add_check(session, new), group="checks", exit_on_error=False)

    async def _add_check(self, session: Session, new: NewCheck) -> None:
        try:
            check, checks = await session.orch.add_check(new.pattern, new.ranks)
        except ValueError as exc:
            self.report("error", f"check not added: {exc}")
            return
        screen = self.screen
        if session is not screen.session:
            return
        screen.state.checks = checks
        screen.refresh_checks()
        state = checks.overall(check)
        matched = sorted({st.match.rank for (cid, _r), st in checks.status.items()
                          if cid == check.id and st.match is not None})
        where = f" (seen on rank{'s' if len(matched) > 1 else ''} {', '.join(map(str, matched))})" \
            if matched else ""
        said = {"passed": f"passed{where}", "failed": f"failed: not seen before the boot ended{where}",
                "pending": f"waiting for the line while the boot goes on{where}"}.get(state, state)
        # the pattern as typed, not repr'd ('\\x1b' read as two backslashes)
        self.report("warning" if state == "failed" else "info", f"check added: '{new.pattern}': {said}")
        screen.checks_panel.display = True
