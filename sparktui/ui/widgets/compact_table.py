"""A DataTable for a few dozen cells that change often: the ranks table, the checks panel.

DataTable keys its render caches by a counter that every cell update bumps, so each update
(the ranks' uptime column, once a second) leaves every cached render stale. Sized for big tables
(up to 10,000 cells), the stale entries piled up for minutes: memory grew and every full garbage
collection had more to walk. These tables keep a few updates' worth.

And a cell is rendered again only when what it shows changed (``CellCache``): with every cell
rendered anew after any update, the once-a-second uptime of 32 ranks made one frame a second
take 15-20 ms (each visible row's nine cells through Rich), and a key pressed then waited for it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rich.text import Text
from textual.cache import LRUCache
from textual.widgets import DataTable

RENDER_CACHES = {"_cell_render_cache": 512, "_row_render_cache": 128,
                 "_row_renderable_cache": 128, "_line_cache": 128}
CELLS_KEPT = 1024  # rendered cells: every cell of 32 rows, with and without the cursor


def _shown(value: object) -> Hashable:
    """What a cell's value looks like, as a key: Rich's Text is not hashable, and its ``==``
    ignores its own style."""
    if isinstance(value, Text):
        return ("text", value.plain, str(value.style), tuple(value.spans), value.justify,
                value.overflow, value.no_wrap, value.end)
    return ("value", value) if isinstance(value, Hashable) else ("object", id(value))


class CellCache:
    """DataTable's cache of rendered cells, keyed by what a cell shows instead of by the table's
    update counter: the counter part of DataTable's key (``_update_count``) is replaced by the
    cell's value, its column's width and its row's height (what the counter stood for).
    DataTable still clears it whenever it clears its own caches (a theme, the cursor shown,
    the rows rebuilt). A key of another shape (another Textual) is used as it is."""

    def __init__(self, table: DataTable[Any], maxsize: int) -> None:
        self.table = table
        self.cells: LRUCache[Hashable, Any] = LRUCache(maxsize)

    def _key(self, key: Any) -> Hashable:
        table = self.table
        try:
            row_key, column_key, base_style, cursor, hover, show_hover, _count, pseudo = key
            column = table.columns[column_key]
            if row_key in table.rows:
                value: object = table.get_cell(row_key, column_key)
                height = table.rows[row_key].height
                index = table.get_row_index(row_key)  # the row's number is in the cell's meta
            else:  # the header
                value, height, index = column.label, table.header_height, -1
            return (row_key, column_key, base_style, cursor, hover, show_hover, pseudo,
                    _shown(value), column.get_render_width(table), height, index,
                    table.cell_padding)
        except Exception:  # any surprise (another Textual): DataTable's own key, as it was
            return ("as-is", key)

    def __contains__(self, key: Any) -> bool:
        return self._key(key) in self.cells

    def __getitem__(self, key: Any) -> Any:
        return self.cells[self._key(key)]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.cells[self._key(key)] = value

    def __len__(self) -> int:
        return len(self.cells)

    def clear(self) -> None:
        self.cells.clear()


class CompactTable(DataTable[Text | str]):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, size in RENDER_CACHES.items():
            cache = getattr(self, name, None)  # DataTable's own: left alone if it renames them
            if isinstance(cache, LRUCache):
                cache.maxsize = size
        if isinstance(getattr(self, "_cell_render_cache", None), LRUCache):
            self._cell_render_cache = CellCache(self, CELLS_KEPT)  # type: ignore[assignment]
