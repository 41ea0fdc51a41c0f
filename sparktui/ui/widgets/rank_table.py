"""One row per rank: node, state, staging, checks, health, restarts, uptime, quiet (the time
since its last line: the rank that went silent first is the one stuck).

The table observes what the screen hands it: the nodes, each rank's last ``RankSnapshot`` (None
until the Orchestrator says anything of it: the state is ``-``), each rank's check counts and
staging text. Every change repaints only the cells whose text or style changed; the theme's
colours come through ``COMPONENT_CLASSES``. The row under the cursor is the selected rank
(restart acts on it). Narrow terminals get fewer, shorter columns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.content import Content
from textual.message import Message
from textual.reactive import var
from textual.widgets import DataTable

from sparktui.core.controls import visible
from sparktui.core.ranks import RankSnapshot, RankState
from sparktui.ui.formatting import checks_text, ink, state_classes, state_css, uptime
from sparktui.ui.widgets.compact_table import CompactTable

Cell = Text | str
LIVE: frozenset[RankState] = frozenset({"booting", "ready", "wedged", "creating"})  # uptime counts


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # 0: as wide as the longest node name
    compact: bool = True  # shown on narrow terminals


COLUMNS = (
    Column("r", "r", 2), Column("node", "node", 0), Column("state", "state", 10),
    Column("staging", "staging", 11, compact=False), Column("checks", "checks", 8),
    Column("health", "health", 6), Column("restarts", "restarts", 8, compact=False),
    Column("up", "uptime", 7, compact=False), Column("quiet", "quiet", 6, compact=False),
)
COMPACT_EXTRA = (Column("restarts", "rs", 2),)  # the restart count still shows, briefly


def _same(a: Cell | None, b: Cell) -> bool:
    """Rich's ``Text.__eq__`` ignores the text's own style: a theme change would not show."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return a == b


class RankTable(CompactTable):
    COMPONENT_CLASSES: ClassVar[set[str]] = state_classes("rank-table")
    DEFAULT_CSS = """
    RankTable {
        height: auto;
        max-height: 12;
        background: $surface;
        & > .datatable--header { background: $panel; }
    """ + state_css("rank-table") + "\n}"

    nodes: var[tuple[str, ...]] = var((), init=False)
    """The node of each rank: a new recipe's ranks (its rows start over)."""
    snapshots: var[tuple[RankSnapshot | None, ...]] = var((), init=False)
    """Each rank as last reported (by rank; None: nothing reported yet)."""
    checks: var[tuple[Mapping[str, int], ...]] = var((), init=False)
    """Each rank's boot-check counts (passed/failed/pending)."""
    staging: var[tuple[str, ...]] = var((), init=False)
    """Each rank's node's staging progress, as text ("" before any)."""
    compact: var[bool] = var(False, init=False)
    """Narrow: fewer, shorter columns."""
    stalled: var[tuple[int, ...]] = var((), init=False)
    """The booting ranks silent for ``[boot] stall`` (the first first): their quiet warns."""

    @dataclass
    class Selected(Message):
        rank: int

    def __init__(self, clock: Callable[[], float], wall: Callable[[], float] = time.time, *,
                 id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self.clock = clock
        self.wall = wall  # the epoch clock the lines' stamps are read against
        # each rank's last line (epoch of its stamp): written on every log batch, read by the
        # once-a-second paint (a reactive would repaint the table on every batch of a flood)
        self.last_line_at: dict[int, float] = {}
        self.values: dict[int, dict[str, Cell]] = {}  # what each cell shows
        self._ready = False  # mounting: the columns can be laid out
        self._titles: tuple[str, str] | None = None  # as last set (``set_titles``)
        self._inks: dict[str, Style] = {}  # each state's colour, until the styles change

    @property
    def world(self) -> int:
        return len(self.nodes)

    @property
    def states(self) -> dict[int, RankState]:
        """The state each reported rank shows."""
        return {snap.rank: snap.state for snap in self.snapshots if snap is not None}

    def on_mount(self) -> None:
        self._ready = True
        self._rebuild()
        self.set_interval(1.0, self._paint)  # the uptime column

    @property
    def selected_rank(self) -> int | None:
        if self.world == 0 or self.row_count == 0:
            return None
        return min(max(self.cursor_row, 0), self.world - 1)

    def columns_shown(self) -> list[Column]:
        if not self.compact:
            return list(COLUMNS)
        return [c for c in COLUMNS if c.compact] + list(COMPACT_EXTRA)

    def watch_nodes(self) -> None:
        self._rebuild()

    def watch_compact(self) -> None:
        self._rebuild()

    def watch_snapshots(self, old: tuple[RankSnapshot | None, ...],
                        new: tuple[RankSnapshot | None, ...]) -> None:
        # the ranks whose snapshot changed (one, from a rank's event; at 32 ranks all 32 rows
        # computed again for each of several events a second was 5 ms each time): the clock's
        # columns of the others follow on the once-a-second paint
        self._paint([r for r in range(len(new)) if r >= len(old) or old[r] is not new[r]])

    def watch_checks(self) -> None:
        self._paint()

    def watch_staging(self) -> None:
        self._paint()

    def watch_stalled(self) -> None:
        self._paint()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._inks = {}
        # another theme: the cells whose colours changed. Textual updates the component styles
        # after this call (reading them here would cache the old ones): paint after it.
        self.call_later(self._paint)

    def _rebuild(self) -> None:
        """Columns and rows again (a few rows: cheap)."""
        if not self._ready:
            return
        cursor = self.cursor_row
        self.clear(columns=True)
        node_width = max([4, *(len(n) for n in self.nodes)])
        shown = self.columns_shown()
        for col in shown:
            self.add_column(col.label, width=col.width or node_width, key=col.key)
        self.values = {rank: self._cells(rank) for rank in range(self.world)}
        for rank in range(self.world):
            values = self.values[rank]
            self.add_row(*(values[col.key] for col in shown), key=str(rank))
        if self.row_count:
            self.move_cursor(row=min(max(cursor, 0), self.row_count - 1))

    def _paint(self, ranks: Iterable[int] | None = None) -> None:
        """The cells that changed since they were last drawn (of ``ranks``; default: all)."""
        if not self._ready or not self.values:
            return
        for rank in range(self.world) if ranks is None else ranks:
            painted = self.values.get(rank)
            if painted is None:
                continue
            for column, value in self._cells(rank).items():
                if not _same(painted.get(column), value):
                    painted[column] = value
                    if column in self.columns and str(rank) in self.rows:
                        self.update_cell(str(rank), column, value)

    def _state(self, state: RankState) -> str:
        return f"rank-table--{state}"

    def _ink(self, state: RankState) -> Style:
        """The state's colour (``ink``), kept: every rank's event paints all 32 rows."""
        style = self._inks.get(state)
        if style is None:
            style = self._inks[state] = ink(self, self._state(state))
        return style

    def _cells(self, rank: int) -> dict[str, Cell]:
        snap = self.snapshots[rank] if rank < len(self.snapshots) else None
        summary = self.checks[rank] if rank < len(self.checks) else None
        staging = self.staging[rank] if rank < len(self.staging) else ""
        cells: dict[str, Cell] = {
            "r": str(rank), "node": Text(visible(self.nodes[rank])), "state": Text("-"),
            "staging": staging or "-", "checks": "-", "health": "-", "restarts": "0", "up": "-",
            "quiet": "-"}
        if summary is not None:
            text, state = checks_text(summary)
            cells["checks"] = Text(text, self._ink(state) if text != "-" else "")
        if snap is None:
            return cells
        cells["state"] = Text(snap.state, self._ink(snap.state))
        code = snap.health
        cells["health"] = Text("-", "") if code is None else \
            Text(str(code), self._ink("ready" if code == 200 else "booting"))
        cells["restarts"] = str(snap.restarts)
        if snap.started is not None and snap.state in LIVE:
            cells["up"] = uptime(self.clock() - snap.started)
        at = self.last_line_at.get(rank)
        if at is not None and snap.state in LIVE:
            style = self._ink("booting") if rank in self.stalled else ""
            delta = self.wall() - at  # a node's clock a moment ahead is no line from the future
            cells["quiet"] = Text(uptime(max(0.0, delta) if delta > -5 else None), style)
        return cells

    def set_titles(self, title: str | Content, subtitle: str | Content) -> None:
        """The border's title and subtitle, set when they changed: each set repaints the whole
        table, and every rank's event (32 ranks: several a second) sets them."""
        said = (str(title), str(subtitle))
        if said != self._titles:
            self._titles = said
            self.border_title, self.border_subtitle = title, subtitle

    def select(self, rank: int) -> None:
        if 0 <= rank < self.world:
            self.move_cursor(row=rank)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.post_message(self.Selected(int(event.row_key.value)))
