"""Doctor's findings: every node's preflight, passed, warned or failed with a sentence. When the
image is missing on a node or differs across nodes, ``s`` copies it (the main screen's image
sync job; a line per node here while it runs, then the doctor runs again)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.widgets import DataTable, LoadingIndicator, Static

from sparktui.backend.doctor import Finding
from sparktui.backend.events import ImageSyncProgress
from sparktui.backend.imagesync import SyncReport, progress_sentence
from sparktui.core.controls import visible
from sparktui.ui.outside import content
from sparktui.ui.screens.dialog import Dialog

MARKS = {"passed": ("✓", "success"), "warned": ("!", "warning"), "failed": ("✗", "error")}


class DoctorScreen(Dialog[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,d", "dismiss", "close", id="doctor-close"),
        Binding("s", "sync", "sync image", id="doctor-sync"),
    ]

    def __init__(self, title: str, run: Callable[[], Awaitable[list[Finding]]],
                 sync: Callable[[Callable[[SyncReport | None], None]], bool] | None = None) -> None:
        """``sync(done)`` starts the image sync (False when it cannot start now) and calls
        ``done`` with its report; None where there is nothing to copy (the local cluster)."""
        super().__init__()
        self.title_text = title
        self.run_doctor = run
        self.sync = sync
        self.findings: list[Finding] | None = None
        self.syncing = False
        self.sync_lines: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = content(self.title_text)  # the recipe's and cluster's names
            dialog.border_subtitle = "esc close"
            yield Static("Checking every node at once…", id="doctor-status")
            yield Static(id="doctor-sync")
            yield LoadingIndicator()
            yield DataTable(id="doctor-table", cursor_type="row")

    def on_mount(self) -> None:
        self.query_one(DataTable).display = False
        self.query_one("#doctor-sync").display = False
        self._run()

    @property
    def image_differs(self) -> bool:
        """Doctor found the image missing on a node or another build on one."""
        return any(f.check in ("image", "same image") and f.verdict == "failed"
                   for f in self.findings or [])

    @property
    def closed(self) -> bool:
        """Dismissed (or being removed) while the doctor ran: its findings go nowhere."""
        return self._dismissed or not self.is_attached or not self.children

    def _subtitle(self) -> None:
        can_sync = self.sync is not None and self.image_differs and not self.syncing
        self.query_one("#dialog").border_subtitle = "s sync image · esc close" if can_sync else "esc close"

    def action_sync(self) -> None:
        if self.sync is None or not self.image_differs or self.syncing:
            return
        if not self.sync(self.sync_finished):
            return  # another action runs: the main screen said so
        self.syncing = True
        self.sync_lines.clear()
        lines = self.query_one("#doctor-sync", Static)
        lines.display = True
        lines.update(Text("Copying the image to the nodes that lack it or hold another build…"))
        self._subtitle()

    def sync_progress(self, p: ImageSyncProgress) -> None:
        """A line per node, as the sync's events arrive (routed here by the main screen)."""
        self.sync_lines[p.node] = progress_sentence(p)
        if self.closed:
            return
        self._show_sync()

    def _show_sync(self) -> None:
        """The sync's lines (they quote the nodes' Docker engines: controls written out)."""
        self.query_one("#doctor-sync", Static).update(Text(visible("\n".join(self.sync_lines.values()))))

    def sync_finished(self, report: SyncReport | None) -> None:
        """The sync ended (None: it failed as a whole; the main screen said why): doctor again."""
        self.syncing = False
        if self.closed:
            return
        if report is None:
            self.sync_lines["sync"] = "the image sync failed (see the notification)"
            self._show_sync()
        self.query_one(LoadingIndicator).display = True
        self.query_one(DataTable).display = False
        self.query_one("#doctor-status", Static).update("Checking every node again…")
        self._run()

    @work(exclusive=True)
    async def _run(self) -> None:
        status = self.query_one("#doctor-status", Static)
        try:
            findings = await self.run_doctor()
            if self.closed:
                return
        except Exception as exc:  # the doctor itself failed: say so, keep the screen
            if self.closed:
                return
            with contextlib.suppress(NoMatches):  # its widgets going with a dismissal under way
                status.update(Text(visible(f"doctor failed: {exc}"), self.ink("error")))
                self.query_one(LoadingIndicator).display = False
            return
        with contextlib.suppress(NoMatches):  # dismissed meanwhile, its widgets half removed
            self.show_findings(findings)  # (the console fuzz: NoMatches in the worker)

    def show_findings(self, findings: list[Finding]) -> None:
        self.findings = findings
        self.query_one(LoadingIndicator).display = False
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.display = True
        node_w = max([4, *(len(f.node) for f in findings)])
        check_w = max([5, *(len(f.check) for f in findings)])
        room = self.query_one("#dialog").content_size.width - node_w - check_w - 1 - 8 - 2
        for label, key, width in (("node", "node", node_w), ("check", "check", check_w), ("", "verdict", 1),
                                  ("finding", "finding", max(20, room))):
            table.add_column(label, key=key, width=width)
        for f in findings:
            mark, color = MARKS.get(f.verdict, ("?", ""))
            table.add_row(Text(visible(f.node)), Text(visible(f.check)),
                          Text(mark, (self.ink(color) if color else Style()) + Style(bold=True)),
                          Text(visible(f.sentence)), height=None)  # may quote a node
        counts = {k: sum(1 for f in findings if f.verdict == k) for k in MARKS}
        hint = " · s copies the image to the nodes that lack it" if self.sync is not None and \
            self.image_differs else ""
        self.query_one("#doctor-status", Static).update(
            f"{counts['passed']} passed · {counts['warned']} warned · {counts['failed']} failed{hint}")
        self._subtitle()
        table.focus()
