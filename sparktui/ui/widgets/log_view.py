"""The log lines on screen: a virtual view (line API) over a bounded list of lines.

Only the rows on screen are rendered. Lines carry their rank, so the merged view prefixes each
with ``r<rank>`` in the rank's theme colour. Long lines scroll sideways, or wrap (``wrap``).
A cursor marks one line: the current grep match, or where a boot check's line was found.

A view that a container above hides (a tab of the grid not in front) keeps taking lines but lays
them out only when it is painted again (``_catch_up``): at 32 ranks (a tab a rank) 31 panes are
hidden, and laying out and scrolling each of them on every batch and every key was a third of
the console's time.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from sparktui.core.controls import FORMAT_RANGES, written
from sparktui.core.linefilter import NO_FILTER, LineFilter
from sparktui.core.runstore import MARKER
from sparktui.ui.logstore import TEXT, LogLine, merge
from sparktui.ui.themes import rank_colors

TS_WIDTH = 13  # "12:01:02.123 "
# Rendered lines kept: a few screens' worth. More only keeps strips (each with a dozen small
# caches of its own) alive long enough to reach the collector's oldest generation, which then
# walks them on every full collection; scrolling back renders the few rows it shows again.
STRIP_CACHE = 256


_PICTURES: dict[int, str | int] = {**{c: 0x2400 + c for c in range(0x20)}, 0x7F: 0x2421,
                                  **{c: 0xFFFD for c in range(0x80, 0xA0)}}
_CONTROLS = str.maketrans({**_PICTURES, **{c: written(chr(c)) for lo, hi in FORMAT_RANGES
                                           for c in range(lo, hi + 1)}})
"""Control characters a container wrote, as their pictures (ESC as ␛, one cell each; C1, which
some terminals obey like ESC [, as �), and format characters, which have no picture, written out
as ``core.controls`` writes them (U+202E, which reverses what follows it, as ``\\u202e``):
shown, never obeyed by the terminal."""


def _clean(text: str) -> str:
    text = text.expandtabs()
    return text if text.isprintable() else text.translate(_CONTROLS)


def _width(text: str) -> int:
    """Cells the cleaned text takes (plain ASCII, the usual case, without measuring)."""
    if text.isascii() and "\t" not in text:
        return len(text)
    return cell_len(_clean(text))


class LogView(ScrollView, can_focus=True):
    """Log lines of one or more ranks."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log-view--cursor",
        "log-view--match",
        "log-view--timestamp",
        "log-view--marker",
    }

    DEFAULT_CSS = """
    LogView {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        /* always, wrapped too (nothing to scroll then: an empty track): a scrollbar that comes
           and goes changes the view's content region, and every `w` was then a layout of the
           whole screen (docs/benchmarks.md, the console at 32 ranks) */
        overflow-x: scroll;
        scrollbar-size-horizontal: 1;
        padding: 0 0 0 1;
        & > .log-view--cursor { background: $accent 35%; }
        & > .log-view--match { background: $warning 45%; text-style: bold; }
        & > .log-view--timestamp { color: $text-muted; }
        & > .log-view--marker { color: $accent; text-style: italic; }
        /* Following, the view sits at the end: the scrollbars would say only that, yet every
           batch of new lines made them paint again, in a frame of their own. */
        &.-following { scrollbar-visibility: hidden; }
    }
    """

    def __init__(self, *, max_lines: int = 100_000, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.max_lines = max_lines
        self.lines: list[LogLine] = []
        self.prefix = True  # "r<rank> " before each line (the merged view)
        self.timestamps = False
        self.wrap = False
        self._follow = True
        self.line_filter: LineFilter = NO_FILTER
        self.cursor: int | None = None
        self.placeholder = ""  # shown when there is no line
        self._lens: list[int] = []  # cell length of each line's text
        self._starts: list[int] = []  # wrap: first row of each line
        self._rows = 0
        self._wrap_width = 0
        self._max_width = 0
        self._cache: LRUCache[int, Strip] = LRUCache(STRIP_CACHE)
        self._rank_styles: list[Style] = []
        self._paint_style: Style | None = None  # the widget's style while a paint is under way
        self._paint_view: tuple[int, int, int] | None = None  # scroll x, y and width, meanwhile
        self._stale = False  # hidden: the lines changed and are not laid out yet
        self._stale_top: LogLine | None = None  # not following: the line at the top back then
        self.add_class("-following")

    # -- content ------------------------------------------------------------------------------
    def set_lines(self, lines: Sequence[LogLine], *, keep: LogLine | None = None) -> None:
        """Replace every line; scroll to the end when following, else to ``keep``."""
        held = self._hold()
        self.lines = list(lines[-self.max_lines:])
        self.cursor = None
        self._cache.clear()
        self._lens = [_width(line[TEXT]) for line in self.lines]
        self._max_width = max(self._lens, default=0)
        if held:  # back then: at ``keep``, else at the top
            self._stale_top = keep if keep is not None else (self.lines[0] if self.lines else None)
            return
        self._relayout()
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        elif keep is not None and keep in self.lines:
            self.show_line(self.lines.index(keep), set_cursor=False)
        else:
            self.scroll_to(y=0, animate=False, immediate=True)
        self.refresh()

    def append(self, lines: Sequence[LogLine]) -> None:
        """Add a batch of lines in capture order. Usually they go at the end; a batch of one
        rank that is older than what another rank already showed (a catch-up after a reattach)
        is merged in where it belongs."""
        if not lines:
            return
        held = self._hold()
        start = len(self.lines)
        if self.lines and lines[0] < self.lines[-1]:
            start = bisect_right(self.lines, lines[0])
            tail = merge([self.lines[start:], lines])
            del self.lines[start:]
            del self._lens[start:]
            lines = tail
            if self.cursor is not None and self.cursor >= start:
                self.cursor = None
            self._cache.clear()
            if self.wrap and not held:
                del self._starts[start:]
                self._rows = self._starts[-1] + self._height(len(self._starts) - 1) if self._starts else 0
        lens = [_width(line[TEXT]) for line in lines]
        self.lines.extend(lines)
        self._lens.extend(lens)
        self._max_width = max(self._max_width, *lens)
        excess = len(self.lines) - self.max_lines
        if excess > 0:
            drop = max(excess, self.max_lines // 10)  # prune in chunks, not on every batch
            del self.lines[:drop]
            del self._lens[:drop]
            self.cursor = None if self.cursor is None or self.cursor < drop else self.cursor - drop
            self._cache.clear()
        if held:
            return
        if excess > 0:
            self._relayout()
        else:
            self._extend_layout(start)
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()

    def clear(self) -> None:
        self.set_lines([])

    def set_placeholder(self, text: str) -> None:
        if text != self.placeholder:
            self.placeholder = text
            self.refresh()

    # -- options ------------------------------------------------------------------------------
    def set_options(self, *, prefix: bool | None = None, timestamps: bool | None = None,
                    wrap: bool | None = None) -> None:
        held = self._hold()
        anchor = None if held else self._anchor()
        if prefix is not None:
            self.prefix = prefix
        if timestamps is not None:
            self.timestamps = timestamps
        if wrap is not None:
            self.wrap = wrap
        self._cache.clear()
        if held:
            return
        self._relayout()
        self._restore(anchor)
        self.refresh()

    def set_filter(self, line_filter: LineFilter) -> None:
        """What to highlight (the lines themselves are chosen by the caller)."""
        self.line_filter = line_filter
        self._cache.clear()
        self.refresh()

    def set_follow(self, follow: bool) -> None:
        self.follow = follow
        if follow:
            self.cursor = None
            self._cache.clear()
            if self._hold():
                return
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            self.refresh()

    @property
    def follow(self) -> bool:
        """Whether new lines scroll the view to the end."""
        return self._follow

    @follow.setter
    def follow(self, follow: bool) -> None:
        if follow == self._follow:
            return
        self._follow = follow
        self.set_class(follow, "-following")
        if not follow:
            self._sync_scrollbars()  # shown again: where the view is now

    # -- the scrollbars, hidden while following -------------------------------------------------
    def _bars_hidden(self) -> bool:
        """Following: the scrollbars are not drawn (``-following``), and the screen's map leaves
        them out. A repaint of one then looks it up in a map of every widget, built again after
        each scroll (an arrangement of the whole screen, several per second under a flood), to
        find nothing: while hidden they are left alone, and brought up to date when shown."""
        return self._follow

    def _scroll_update(self, virtual_size: Size) -> None:
        if not self._bars_hidden():
            super()._scroll_update(virtual_size)
            return
        self._refresh_scrollbars()
        self.scroll_x = self.validate_scroll_x(self.scroll_x)
        self.scroll_y = self.validate_scroll_y(self.scroll_y)

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        if not self._bars_hidden() and self.show_horizontal_scrollbar:
            self.horizontal_scrollbar.position = new_value
        if round(old_value) != round(new_value):
            self.refresh(self.size.region)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        if not self._bars_hidden() and self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = new_value
        if round(old_value) != round(new_value):
            self.refresh(self.size.region)

    def _sync_scrollbars(self) -> None:
        """The scrollbars' sizes and positions as the view is now, repainted."""
        if not self.is_mounted:
            return
        super()._scroll_update(self.virtual_size)
        if self.show_horizontal_scrollbar:
            self.horizontal_scrollbar.position = self.scroll_x
            self.horizontal_scrollbar.refresh()
        if self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = self.scroll_y
            self.vertical_scrollbar.refresh()

    # -- hidden: lines taken, laid out when painted ----------------------------------------------
    def _hidden(self) -> bool:
        """Whether the view or a container above it is not displayed (a tab not in front, the
        one view while the grid is shown)."""
        node: object = self
        while isinstance(node, Widget):
            if not node.display:
                return True
            node = node.parent
        return False

    def _hold(self) -> bool:
        """Before a change: True when hidden, and the change is laid out by ``_catch_up`` (the
        line at the top now is noted, to bring back in sight then); shown, the layout is
        brought up to date first and the change laid out at once."""
        if not (self.is_mounted and self._hidden()):
            self._catch_up()
            return False
        if not self._stale:
            self._stale = True
            if not self.follow and self.lines:
                index = self._anchor()
                self._stale_top = self.lines[min(index or 0, len(self.lines) - 1)]
        return True  # no refresh: nothing of it is on screen, and render_lines catches up

    def _catch_up(self) -> None:
        """Lay out what changed while hidden, and scroll as it would have."""
        if not self._stale:
            return
        self._stale = False
        top, self._stale_top = self._stale_top, None
        self._relayout()
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        elif top is not None and self.lines:
            index = min(bisect_left(self.lines, top), len(self.lines) - 1)
            self.scroll_to(y=self._row_of(index), animate=False, immediate=True)
        self.refresh()

    def on_show(self) -> None:
        self._catch_up()

    # -- the operator scrolls: reading back pauses following, the end resumes it ---------------
    @dataclass
    class FollowChanged(Message):
        follow: bool

    def _pause(self) -> None:
        if self.follow:
            self.follow = False
            self.post_message(self.FollowChanged(False))

    def action_scroll_up(self) -> None:
        self._pause()
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self._pause()
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self._pause()
        super().action_scroll_home()

    def action_scroll_end(self) -> None:
        self.set_follow(True)
        self.post_message(self.FollowChanged(True))

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._pause()  # Widget's own handler scrolls

    def _anchor(self) -> int | None:
        """The line at the top of the view (or the cursor), to keep in place across a relayout."""
        if self.cursor is not None:
            return self.cursor
        if not self.lines:
            return None
        if self._stale:
            return bisect_left(self.lines, self._stale_top) if self._stale_top is not None else None
        return self._line_at_row(int(self.scroll_y))[0]

    def _restore(self, anchor: int | None) -> None:
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        elif anchor is not None and anchor < len(self.lines):
            self.scroll_to(y=self._row_of(anchor), animate=False, immediate=True)

    # -- layout -------------------------------------------------------------------------------
    @property
    def _lead(self) -> int:
        return (3 if self.prefix else 0) + (TS_WIDTH if self.timestamps else 0)

    def _text_width(self) -> int:
        return max(1, self.scrollable_content_region.width)

    def _relayout(self) -> None:
        self._starts = []
        self._rows = 0
        self._wrap_width = self._text_width()
        self._extend_layout(0)

    def _height(self, index: int) -> int:
        """Rows of line ``index`` when wrapped."""
        return max(1, -(-(self._lead + self._lens[index]) // self._wrap_width))

    def _extend_layout(self, start: int) -> None:
        lead = self._lead
        if self.wrap:
            width = self._wrap_width
            # rows of each line: ceil((lead + length) / width), at least 1 (an empty line)
            heights = [-(-(lead + length) // width) or 1 for length in self._lens[start:]]
            self._starts.extend(accumulate(heights, initial=self._rows))
            self._rows = self._starts.pop()  # the last running total is the next line's start
            self._set_virtual_size(Size(width, self._rows))
        else:
            self._rows = len(self.lines)
            self._set_virtual_size(Size(self._max_width + lead, self._rows))

    def _set_virtual_size(self, size: Size) -> None:
        """What can be scrolled, without a layout of the whole screen.

        Assigning ``virtual_size`` (a reactive with ``layout=True``) makes the screen lay out
        every widget again; with new lines ten times a second, and every key that re-lays the
        lines out, that was most of each frame's work (docs/benchmarks.md, UI flood). The
        view's own size never depends on its lines (no ``auto`` dimension: it fills what its
        parent gives it), so only its scrollbars and scroll limits need updating, which is what
        Textual itself does for a size found without layout (``Widget._size_updated``). A
        scrollbar that appears or goes still asks for a layout, as it must."""
        if size == self.virtual_size:
            return
        if self.styles.auto_dimensions or not self.is_mounted:
            self.virtual_size = size
            return
        self.set_reactive(LogView.virtual_size, size)
        self._scroll_update(size)
        self.refresh()

    def _line_at_row(self, row: int) -> tuple[int, int]:
        """(line index, row within the line) of a virtual row."""
        if not self.wrap:
            return row, 0
        index = max(0, bisect_right(self._starts, row) - 1)
        return index, row - self._starts[index] if self._starts else 0

    def _row_of(self, index: int) -> int:
        if not self.wrap:
            return index
        return self._starts[index] if index < len(self._starts) else self._rows

    def on_resize(self) -> None:
        if self._stale:
            self._catch_up()
            return
        if self.wrap and self._text_width() != self._wrap_width:
            anchor = self._anchor()
            self._cache.clear()
            self._relayout()
            self._restore(anchor)

    # -- cursor and jumps ---------------------------------------------------------------------
    def middle_line(self) -> LogLine | None:
        """The line in the middle of the view: kept in sight when the lines are laid out again."""
        if not self.lines:
            return None
        self._catch_up()
        row = int(self.scroll_y) + self.scrollable_content_region.height // 2
        return self.lines[min(self._line_at_row(row)[0], len(self.lines) - 1)]

    def show_line(self, index: int, set_cursor: bool = True) -> None:
        """Scroll so line ``index`` sits in the middle of the view; mark it with the cursor."""
        if not 0 <= index < len(self.lines):
            return
        self._catch_up()
        if set_cursor:
            self.follow = False
            self.cursor = index
            self._cache.clear()
        row = self._row_of(index)
        self.scroll_to(y=max(0, row - self.scrollable_content_region.height // 2), animate=False,
                       immediate=True)
        self.refresh()

    def step(self, forward: bool) -> bool:
        """Move the cursor to the next (previous) line; False at the end."""
        if not self.lines:
            return False
        self._catch_up()
        if self.cursor is None:
            top = self._line_at_row(int(self.scroll_y))[0]
            bottom = self._line_at_row(int(self.scroll_y) + self.scrollable_content_region.height - 1)[0]
            target = top if forward else min(bottom, len(self.lines) - 1)
        else:
            target = self.cursor + (1 if forward else -1)
        if not 0 <= target < len(self.lines):
            return False
        self.show_line(target)
        return True

    # -- rendering ----------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rank_styles = []
        self._cache.clear()

    def _rank_style(self, rank: int) -> Style:
        if not self._rank_styles:
            self._rank_styles = [Style(color=c, bold=True)
                                 for c in rank_colors(self.app.theme_variables)]
        return self._rank_styles[rank % len(self._rank_styles)]

    def render_lines(self, crop: Region) -> list[Strip]:
        self._catch_up()  # shown again: before Show arrives, this frame already paints it
        # The widget's Rich style walks every ancestor, and the scroll offset and content
        # region are computed properties: once per paint, not for every row.
        self._paint_style = self.rich_style
        scroll_x, scroll_y = self.scroll_offset
        self._paint_view = (scroll_x, scroll_y, self.scrollable_content_region.width)
        try:
            return super().render_lines(crop)
        finally:
            self._paint_style = None
            self._paint_view = None

    @property
    def _base_style(self) -> Style:
        return self._paint_style if self._paint_style is not None else self.rich_style

    def _line_strip(self, index: int) -> Strip:
        """The whole line as one strip. Segments are built directly (not through a Rich
        ``Text``): under a flood every row on screen is a new line in every frame."""
        cached = self._cache.get(index)
        if cached is not None:
            return cached
        ts, rank, _no, raw = self.lines[index]
        base = self._base_style
        if index == self.cursor:
            base = base + self.get_component_rich_style("log-view--cursor")
        segments: list[Segment] = []
        cells = 0
        if self.prefix:
            label = f"r{rank}".ljust(3)
            segments.append(Segment(label, base + self._rank_style(rank)))
            cells += len(label)
        if self.timestamps:
            stamp = (ts[11:23] if len(ts) >= 23 else ts[11:19].ljust(12)) + " "
            segments.append(Segment(stamp, base + self.get_component_rich_style("log-view--timestamp")))
            cells += len(stamp)
        body = _clean(raw)
        style = base + self.get_component_rich_style("log-view--marker") if body.startswith(MARKER) else base
        pos = 0
        spans = self.line_filter.spans(body)
        if spans:
            matched = style + self.get_component_rich_style("log-view--match")
            for start, end in spans:
                if start > pos:
                    segments.append(Segment(body[pos:start], style))
                segments.append(Segment(body[start:end], matched))
                pos = end
        if pos < len(body):
            segments.append(Segment(body[pos:], style))
        strip = Strip(segments, cells + self._lens[index])
        self._cache[index] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        if self._paint_view is not None:
            scroll_x, scroll_y, width = self._paint_view
        else:
            (scroll_x, scroll_y), width = self.scroll_offset, self.scrollable_content_region.width
        row = scroll_y + y
        base = self._base_style
        if not self.lines and y == 1 and self.placeholder:
            text = Text(self.placeholder[:width].center(width), no_wrap=True, end="")
            text.stylize(self.get_component_rich_style("log-view--timestamp"))
            return Strip([Segment(s.text, base + s.style if s.style else base)
                          for s in text.render(self.app.console)], width)
        if row >= self._rows or not self.lines:
            return Strip.blank(width, base)
        index, sub = self._line_at_row(row)
        if index >= len(self.lines):
            return Strip.blank(width, base)
        strip = self._line_strip(index)
        fill = base + self.get_component_rich_style("log-view--cursor") if index == self.cursor else base
        if self.wrap:
            start = sub * self._wrap_width
            return strip.crop_extend(start, start + width, fill)
        return strip.crop_extend(scroll_x, scroll_x + width, fill)
