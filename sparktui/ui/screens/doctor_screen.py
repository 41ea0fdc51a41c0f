"""Doctor's findings: every node's preflight, passed, warned or failed with a sentence."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, LoadingIndicator, Static

from sparktui.backend.doctor import Finding
from sparktui.ui.colors import theme_colors
from sparktui.ui.screens.dialog import Dialog

MARKS = {"passed": ("✓", "success"), "warned": ("!", "warning"), "failed": ("✗", "error")}


class DoctorScreen(Dialog[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,d", "dismiss", "close", id="doctor-close")]

    def __init__(self, title: str, run: Callable[[], Awaitable[list[Finding]]]) -> None:
        super().__init__()
        self.title_text = title
        self.run_doctor = run
        self.findings: list[Finding] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = self.title_text
            dialog.border_subtitle = "esc close"
            yield Static("Checking every node at once…", id="doctor-status")
            yield LoadingIndicator()
            yield DataTable(id="doctor-table", cursor_type="row")

    def on_mount(self) -> None:
        self.query_one(DataTable).display = False
        self._run()

    @work(exclusive=True)
    async def _run(self) -> None:
        status = self.query_one("#doctor-status", Static)
        try:
            findings = await self.run_doctor()
        except Exception as exc:  # the doctor itself failed: say so, keep the screen
            error = theme_colors(self.app.theme_variables).get("error", "red")
            status.update(Text(f"doctor failed: {exc}", error))
            self.query_one(LoadingIndicator).display = False
            return
        self.show_findings(findings)

    def show_findings(self, findings: list[Finding]) -> None:
        self.findings = findings
        self.query_one(LoadingIndicator).display = False
        table = self.query_one(DataTable)
        table.display = True
        node_w = max([4, *(len(f.node) for f in findings)])
        check_w = max([5, *(len(f.check) for f in findings)])
        room = self.query_one("#dialog").content_size.width - node_w - check_w - 1 - 8 - 2
        for label, key, width in (("node", "node", node_w), ("check", "check", check_w), ("", "verdict", 1),
                                  ("finding", "finding", max(20, room))):
            table.add_column(label, key=key, width=width)
        v = theme_colors(self.app.theme_variables)
        for f in findings:
            mark, color = MARKS.get(f.verdict, ("?", ""))
            table.add_row(Text(f.node), Text(f.check), Text(mark, f"bold {v.get(color, '')}".strip()),
                          Text(f.sentence), height=None)
        counts = {k: sum(1 for f in findings if f.verdict == k) for k in MARKS}
        self.query_one("#doctor-status", Static).update(
            f"{counts['passed']} passed · {counts['warned']} warned · {counts['failed']} failed")
        table.focus()
