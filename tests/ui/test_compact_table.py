"""CompactTable: drawn exactly as a DataTable, with a cell rendered again only when what it shows
changed (an update of one cell used to render every cell on screen again)."""

from __future__ import annotations

from typing import Any

from rich.padding import Padding
from rich.text import Text
from textual.app import App, ComposeResult
from textual.renderables.styled import Styled
from textual.widgets import DataTable

from sparktui.ui.widgets.compact_table import CellCache, CompactTable


class Tables(App[None]):
    def compose(self) -> ComposeResult:
        yield CompactTable(id="compact", cursor_type="row")
        yield DataTable(id="plain", cursor_type="row")


def drawn(table: DataTable[Any]) -> list[list[tuple[str, object]]]:
    """Every visible line as (text, colours and attributes, meta) per segment."""
    return [[(seg.text, seg.style and (seg.style.color, seg.style.bgcolor, seg.style._attributes,
                                       seg.style.meta))
             for seg in strip] for strip in table.render_lines(table.size.region)]


async def test_a_compact_table_is_drawn_as_a_datatable_and_renders_only_the_cells_that_changed() -> None:
    app = Tables()
    async with app.run_test(size=(60, 30)) as pilot:
        tables: list[DataTable[Any]] = list(app.query(DataTable))
        compact, plain = tables
        assert isinstance(compact._cell_render_cache, CellCache)
        for table in tables:
            table.styles.height = 12
            table.add_column("r", width=2, key="r")
            table.add_column("state", width=10, key="state")
            table.add_column("up", width=7, key="up")
            for r in range(20):
                table.add_row(str(r), Text("ready", "green"), f"{r}s", key=str(r))
        app.set_focus(None)  # both alike (focus changes the header's colour)
        await pilot.pause()
        assert drawn(compact) == drawn(plain)

        rendered: list[object] = []  # the cells rendered (each through Rich, in padding)
        render_lines = app.console.render_lines

        def recording(renderable: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(renderable, Styled) and isinstance(renderable.renderable, Padding):
                rendered.append(renderable.renderable.renderable)
            return render_lines(renderable, *args, **kwargs)

        app.console.render_lines = recording  # type: ignore[method-assign]
        cells = []
        for table in tables:
            rendered.clear()
            table.update_cell("3", "up", "99s")
            await pilot.pause()
            table.render_lines(table.size.region)
            cells.append([str(cell) for cell in rendered])
        assert cells[0] == ["99s"]  # the cell that changed
        assert len(cells[1]) > 30  # DataTable: every cell on screen, header too
        assert drawn(compact) == drawn(plain)

        for table in tables:
            table.update_cell("4", "state", Text("failed", "red"))
            table.move_cursor(row=5)
        await pilot.pause()
        assert drawn(compact) == drawn(plain)
        app.theme = "textual-light"  # the caches cleared: drawn in the new colours
        await pilot.pause()
        assert drawn(compact) == drawn(plain)
