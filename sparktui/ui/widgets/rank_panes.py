"""The logs side by side: one pane per rank, in a grid up to eight ranks and in tabs beyond.

Each pane is a ``LogView`` of one rank under a title line (rank, node) in the rank's colour.
The panes hold lines; what they hold (grep, follow, wrap) is the log panel's business.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Static, TabbedContent, TabPane

from sparktui.core.controls import visible
from sparktui.ui.outside import content
from sparktui.ui.themes import rank_colors
from sparktui.ui.widgets.log_view import LogView

GRID_MAX = 8  # more ranks than this: one tab per rank


def grid_shape(world: int) -> tuple[int, int]:
    """(columns, rows): side by side up to two, then two rows (2x2 for four, 4x2 for eight)."""
    if world <= 2:
        return max(1, world), 1
    columns = -(-world // 2)
    return columns, 2


class RankPane(Vertical):
    """One rank's title line over its log."""

    DEFAULT_CSS = """
    RankPane {
        height: 1fr;
        & > .rank-pane--title { height: 1; background: $panel; padding: 0 1; }
    }
    """

    def __init__(self, rank: int, node: str) -> None:
        super().__init__(id=f"rank-pane-{rank}")
        self.rank = rank
        self.node = node
        self.view = LogView(id=f"rank-view-{rank}")
        """Kept, not queried: the log panel asks for it on every batch of every rank."""
        self.view.prefix = False  # the title says whose lines these are

    def compose(self) -> ComposeResult:
        yield Static(classes="rank-pane--title")
        yield self.view

    def on_mount(self) -> None:
        self.paint_title()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.paint_title())

    def paint_title(self) -> None:
        colors = rank_colors(self.app.theme_variables)
        title = Text(f"r{self.rank}", style=f"bold {colors[self.rank % len(colors)]}")
        title.append(f" {visible(self.node)}")
        self.query_one(".rank-pane--title", Static).update(title)


class RankPanes(Vertical):
    DEFAULT_CSS = """
    RankPanes {
        height: 1fr;
        & > Grid { grid-gutter: 0 1; }
        & TabbedContent, & TabPane { height: 1fr; padding: 0; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.nodes: list[str] = []
        self._panes: dict[int, RankPane] = {}
        """The mounted panes by rank: a query walks every pane's widgets (32 panes: 6 ms a
        call, on every batch of every rank, was most of the console's time)."""

    async def setup(self, nodes: list[str]) -> None:
        """A pane for each rank (``nodes[rank]`` is its node); nothing changes if the ranks
        are the same."""
        if nodes == self.nodes and self.children:
            return
        self.nodes = list(nodes)
        self._panes = {}
        await self.remove_children()
        panes = [RankPane(rank, node) for rank, node in enumerate(nodes)]
        if not panes:
            return
        if len(panes) <= GRID_MAX:
            grid = Grid(*panes)
            columns, rows = grid_shape(len(panes))
            grid.styles.grid_size_columns = columns
            grid.styles.grid_size_rows = rows
            await self.mount(grid)
            self._panes = {pane.rank: pane for pane in panes}
        else:
            tabs = TabbedContent()
            await self.mount(tabs)
            for pane in panes:
                await tabs.add_pane(TabPane(content(f"r{pane.rank} {pane.node}"), pane,
                                            id=f"rank-tab-{pane.rank}"))
                self._panes[pane.rank] = pane

    @property
    def views(self) -> list[LogView]:
        return [pane.view for pane in self._panes.values()]

    def view(self, rank: int) -> LogView | None:
        pane = self._panes.get(rank)
        return pane.view if pane is not None else None

    def show(self, rank: int) -> None:
        """Bring the rank's pane forward (its tab, beyond the grid)."""
        tabs = self.query(TabbedContent)
        if tabs and rank in self._panes:
            tabs.first().active = f"rank-tab-{rank}"
