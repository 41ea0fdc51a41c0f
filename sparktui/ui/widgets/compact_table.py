"""A DataTable for a few dozen cells that change often: the ranks table, the checks panel.

DataTable keys its render caches by a counter that every cell update bumps, so each update
(the ranks' uptime column, once a second) leaves every cached render stale. Sized for big tables
(up to 10,000 cells), the stale entries piled up for minutes: memory grew and every full garbage
collection had more to walk. These tables keep a few updates' worth.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.cache import LRUCache
from textual.widgets import DataTable

RENDER_CACHES = {"_cell_render_cache": 512, "_row_render_cache": 128,
                 "_row_renderable_cache": 128, "_line_cache": 128}


class CompactTable(DataTable[Text | str]):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, size in RENDER_CACHES.items():
            cache = getattr(self, name, None)  # DataTable's own: left alone if it renames them
            if isinstance(cache, LRUCache):
                cache.maxsize = size
