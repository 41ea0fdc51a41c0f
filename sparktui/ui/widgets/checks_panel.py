"""Boot checks, one row per check, one column per rank: passed ✓, failed ✗, pending …

Enter on a cell shows the line that decided it in the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import var
from textual.widgets import DataTable

from sparktui.core.checks import BootChecks, Check, CheckStatus
from sparktui.core.controls import visible
from sparktui.core.ranks import RankState
from sparktui.ui.formatting import ink, muted_css, palette, state_classes, state_css
from sparktui.ui.widgets.compact_table import CompactTable

KIND_LABEL = {"ready": "ready", "must_show": "show", "must_not_show": "never", "args": "args"}
MARK = {"passed": "✓", "failed": "✗", "pending": "…"}
MARK_STATE: dict[str, RankState] = {"passed": "ready", "failed": "failed", "pending": "pending"}
PATTERN_WIDTH = 48


class ChecksPanel(CompactTable):
    COMPONENT_CLASSES: ClassVar[set[str]] = {*state_classes("checks-panel"), "checks-panel--kind"}
    DEFAULT_CSS = muted_css("""
    ChecksPanel {
        height: auto;
        max-height: 14;
        background: $surface;
        & > .datatable--header { background: $panel; }
        & > .checks-panel--kind { color: $muted; }
    """) + state_css("checks-panel") + "\n}"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "show line", show=True, id="checks-show-line"),
    ]

    @dataclass
    class Jump(Message):
        rank: int
        line_no: int
        text: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="cell", zebra_stripes=False)
        self._palette: tuple[Style, ...] = ()
        self.world = 0
        self._failure_row: int | None = None  # the first failed check's row, last drawn

    checks: var[BootChecks | None] = var(None, always_update=True, init=False)
    """The checks as last reported (each report is a new snapshot)."""

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:  # the component styles are updated after this call (rank_table)
            self.call_later(self._restyle)

    def _restyle(self) -> None:
        if self.checks is not None and palette(self) != self._palette:
            self.watch_checks(self.checks)  # another theme: the marks' colours

    def watch_checks(self, checks: BootChecks | None) -> None:
        """Redraw every check (cheap: a dozen rows), keeping the cursor where it was."""
        self._palette = palette(self)
        world = checks.world if checks is not None else 0
        cursor = self.cursor_coordinate
        if world != self.world or not self.columns:
            self.clear(columns=True)
            self.world = world
            self.add_column("kind", width=6, key="kind")
            self.add_column("check", width=PATTERN_WIDTH, key="check")
            for r in range(world):
                self.add_column(f"r{r}", width=max(2, len(f"r{r}")), key=f"r{r}")
            self.add_column("all", width=3, key="all")
        else:
            self.clear()
        if checks is None:
            return
        first_failed: int | None = None
        for row, check in enumerate(checks.checks):
            pattern = visible(check.pattern)  # the recipe's, or typed: text, escapes written out
            if check.kind == "args":  # a rank's flags: what its dump said of them
                rank = check.ranks[0] if isinstance(check.ranks, list) else 0
                report = checks.report(rank)
                pattern = f"r{rank} " + (visible(report.short()) if report else "engine arguments")
            if len(pattern) > PATTERN_WIDTH:
                pattern = pattern[:PATTERN_WIDTH - 1] + "…"
            kind = KIND_LABEL.get(check.kind, check.kind) + ("*" if check.added else "")
            cells: list[Text | str] = [Text(kind, ink(self, "checks-panel--kind")), Text(pattern)]
            for r in range(world):
                st = checks.status.get((check.id, r))
                cells.append(self._mark(st))
            overall = checks.overall(check)
            if overall == "failed" and first_failed is None:
                first_failed = row
            cells.append(Text(MARK[overall], self._ink(MARK_STATE[overall])))
            self.add_row(*cells, key=str(check.id))
        if first_failed is not None and first_failed != self._failure_row:
            # a new first failure: into view (a dozen rows and more do not fit the panel, and
            # the args rows come last); the cursor is the operator's again until the next one
            cursor = cursor._replace(row=first_failed)
        self._failure_row = first_failed
        if self.row_count:
            self.cursor_coordinate = self.validate_cursor_coordinate(cursor)

    def _ink(self, state: RankState) -> Style:
        return ink(self, f"checks-panel--{state}")

    def _mark(self, st: CheckStatus | None) -> Text:
        if st is None:
            return Text("")
        return Text(MARK[st.state], self._ink(MARK_STATE[st.state]))

    def check_at_cursor(self) -> Check | None:
        if self.checks is None or not self.row_count:
            return None
        row = self.cursor_coordinate.row
        return self.checks.checks[row] if 0 <= row < len(self.checks.checks) else None

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        event.stop()
        check = self.check_at_cursor()
        if check is None or self.checks is None:
            return
        column = event.coordinate.column - 2
        ranks = [column] if 0 <= column < self.world else list(range(self.world))
        for r in ranks:
            st = self.checks.status.get((check.id, r))
            if st is not None and st.match is not None:
                self.post_message(self.Jump(st.match.rank, st.match.line_no, st.match.text))
                return
        self.app.notify("No line decided this check yet" +
                        (f" on rank {column}" if 0 <= column < self.world else ""),
                        severity="warning", timeout=3, markup=False)
