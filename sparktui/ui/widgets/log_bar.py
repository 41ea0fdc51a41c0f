"""The line above the logs: which ranks are shown, follow/wrap/time switches, the grep count,
how many health-probe lines are hidden."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from sparktui.core.controls import visible
from sparktui.ui.formatting import ink, muted_css
from sparktui.ui.logmodel import LogBarState as LogBarState  # what the bar paints
from sparktui.ui.themes import rank_colors


class LogBar(Widget):
    """Paints ``state`` (set by the log panel, from its model): one row, as wide as the panel, so
    new text never changes its size and a repaint is no layout (under a flood that was a layout
    of the whole screen at every batch of lines)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"log-bar--accent", "log-bar--error", "log-bar--warning",
                                             "log-bar--muted"}
    DEFAULT_CSS = muted_css("""
    LogBar {
        width: 1fr;
        height: 1;
        background: $panel;
        color: $foreground;
        padding: 0 1;
        & > .log-bar--accent { color: $accent; text-style: bold; }
        & > .log-bar--error { color: $error; text-style: bold; }
        & > .log-bar--warning { color: $warning; text-style: bold; }
        /* the panels' muted shade, taken over the surface as theirs (the bar is on the panel) */
        & > .log-bar--muted { color: $muted; background: $surface; }
    }
    """)

    state: reactive[LogBarState] = reactive(LogBarState, layout=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._views: tuple[tuple[object, ...], Content] | None = None  # (what for, the ranks part)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.refresh()  # another theme: the rank colours are theme variables

    def render(self) -> Content:
        return self.render_state(self.state)

    def _ranks_part(self, s: LogBarState) -> Content:
        """`` all  r0  r1 ...`` with the shown one marked: built when the ranks, the shown one
        or the colours change, not at every repaint (32 ranks' labels were most of the bar's
        4.8 ms a repaint, and under a flood the bar repaints at every batch)."""
        colors = rank_colors(self.app.theme_variables)
        key = (s.world, s.shown, tuple(colors))
        if self._views is not None and self._views[0] == key:
            return self._views[1]
        out = Text()
        views = [("all", None), *((f"r{r}", r) for r in range(s.world))]
        for label, rank in views:
            style = colors[rank % len(colors)] if rank is not None else ""
            if rank == s.shown:
                out.append(f"[{label}]", f"bold reverse {style}".strip())
            else:
                out.append(f" {label} ", style)
        out.append("  ")
        part = Content.from_rich_text(out)
        self._views = (key, part)
        return part

    def render_state(self, s: LogBarState) -> Content:
        accent, muted = ink(self, "log-bar--accent"), ink(self, "log-bar--muted")
        out = Text(no_wrap=True, overflow="ellipsis")
        if s.note:
            out.append(s.note, accent)
        elif s.grep_error:
            out.append(visible(s.grep_error), ink(self, "log-bar--error"))  # quotes the pattern
        elif s.grep and s.matches is not None:
            inverted = s.grep.startswith("!")
            noun = ("line" if s.matches == 1 else "lines") if inverted else \
                ("match" if s.matches == 1 else "matches")
            more = "+" if s.scanning else ""
            out.append(f"{s.matches:,}{more} {noun}", accent)
            if s.scanning:
                out.append(f" · scanning the run's files {s.scanned:.0%}", muted)
        elif s.grep and s.scanning:
            out.append("scanning the run's files…", muted)
        else:
            out.append(f"{s.lines:,} lines", muted)
            if s.hidden:
                out.append(f" · {s.hidden:,} probe line{'' if s.hidden == 1 else 's'} hidden", muted)
        flags = ["follow" if s.follow else "paused"]
        if not s.hide_probes:
            flags.append("probes shown")
        if s.grid:
            flags.append("side by side")
        if s.wrap:
            flags.append("wrap")
        if s.timestamps:
            flags.append("time")
        out.append("  ")
        out.append(" · ".join(flags), muted if s.follow else ink(self, "log-bar--warning"))
        return self._ranks_part(s) + Content.from_rich_text(out)
