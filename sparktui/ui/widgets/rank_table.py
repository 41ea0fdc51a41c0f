"""One row per rank: node, state, staging, checks, health, restarts, uptime.

A rank's state is what the Orchestrator last said about it (``RankChanged``); until it says
anything the state is ``-``. The row under the cursor is the selected rank (restart acts on it).
Narrow terminals get fewer, shorter columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from sparktui.core.controls import visible
from sparktui.ui.colors import theme_colors
from sparktui.ui.formatting import checks_text, state_style, uptime
from sparktui.ui.widgets.compact_table import CompactTable

Cell = Text | str


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
    Column("up", "uptime", 7, compact=False),
)
COMPACT_EXTRA = (Column("restarts", "rs", 2),)  # the restart count still shows, briefly


class RankTable(CompactTable):
    DEFAULT_CSS = """
    RankTable {
        height: auto;
        max-height: 12;
        background: $surface;
        & > .datatable--header { background: $panel; }
    }
    """

    @dataclass
    class Selected(Message):
        rank: int

    def __init__(self, clock: Callable[[], float], *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self.clock = clock
        self.compact = False
        self.nodes: list[str] = []
        self.values: dict[int, dict[str, Cell]] = {}
        self.states: dict[int, str] = {}
        self.check_states: dict[int, tuple[str, str]] = {}
        self.started: dict[int, float | None] = {}

    @property
    def world(self) -> int:
        return len(self.nodes)

    def on_mount(self) -> None:
        self._rebuild()
        self.set_interval(1.0, self.tick)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.restyle())

    @property
    def selected_rank(self) -> int | None:
        if self.world == 0 or self.row_count == 0:
            return None
        return min(max(self.cursor_row, 0), self.world - 1)

    def columns_shown(self) -> list[Column]:
        if not self.compact:
            return list(COLUMNS)
        return [c for c in COLUMNS if c.compact] + list(COMPACT_EXTRA)

    def _rebuild(self) -> None:
        """Columns and rows again from the kept values (a few rows: cheap)."""
        cursor = self.cursor_row
        self.clear(columns=True)
        node_width = max([4, *(len(n) for n in self.nodes)])
        shown = self.columns_shown()
        for col in shown:
            self.add_column(col.label, width=col.width or node_width, key=col.key)
        for rank in range(self.world):
            values = self.values[rank]
            self.add_row(*(values.get(col.key, "-") for col in shown), key=str(rank))
        if self.row_count:
            self.move_cursor(row=min(max(cursor, 0), self.row_count - 1))

    def set_compact(self, compact: bool) -> None:
        if compact != self.compact:
            self.compact = compact
            self._rebuild()

    def setup(self, nodes: list[str]) -> None:
        self.nodes = list(nodes)
        self.states.clear()
        self.check_states.clear()
        self.started.clear()
        self.values = {rank: {"r": str(rank), "node": Text(visible(node)), "state": Text("-"), "staging": "-",
                              "checks": "-", "health": "-", "restarts": "0", "up": "-"}
                       for rank, node in enumerate(nodes)}
        self._rebuild()

    def select(self, rank: int) -> None:
        if 0 <= rank < self.world:
            self.move_cursor(row=rank)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.post_message(self.Selected(int(event.row_key.value)))

    def _set(self, rank: int, column: str, value: Cell) -> None:
        if not 0 <= rank < self.world:
            return
        self.values[rank][column] = value
        if column in self.columns and str(rank) in self.rows:
            self.update_cell(str(rank), column, value)

    def _vars(self) -> Mapping[str, str]:
        return theme_colors(self.app.theme_variables)

    def set_state(self, rank: int, state: str) -> None:
        self.states[rank] = state
        self._set(rank, "state", Text(state, state_style(state, self._vars())))

    def set_checks(self, rank: int, summary: Mapping[str, int]) -> None:
        text, state = checks_text(summary)
        self.check_states[rank] = (text, state)
        self._set(rank, "checks", Text(text, state_style(state, self._vars()) if text != "-" else ""))

    def set_health(self, rank: int, code: int | None) -> None:
        style = "" if code is None else state_style("ready" if code == 200 else "booting", self._vars())
        self._set(rank, "health", Text("-" if code is None else str(code), style))

    def set_restarts(self, rank: int, count: int) -> None:
        self._set(rank, "restarts", str(count))

    def set_staging(self, rank: int, text: str) -> None:
        self._set(rank, "staging", text)

    def set_started(self, rank: int, started: float | None) -> None:
        self.started[rank] = started
        self._tick_rank(rank)

    def _tick_rank(self, rank: int) -> None:
        started = self.started.get(rank)
        live = self.states.get(rank) in ("booting", "ready", "creating")
        value = uptime(self.clock() - started) if started is not None and live else "-"
        if self.values.get(rank, {}).get("up") != value:
            self._set(rank, "up", value)

    def tick(self) -> None:
        for rank in self.started:
            self._tick_rank(rank)

    def restyle(self) -> None:
        for rank, state in self.states.items():
            self.set_state(rank, state)
        for rank, (text, state) in self.check_states.items():
            self._set(rank, "checks", Text(text, state_style(state, self._vars()) if text != "-" else ""))
