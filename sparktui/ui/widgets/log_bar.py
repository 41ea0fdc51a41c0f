"""The line above the logs: which ranks are shown, follow/wrap/time switches, the grep count,
how many health-probe lines are hidden."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from sparktui.core.controls import visible
from sparktui.ui.colors import theme_colors
from sparktui.ui.themes import rank_colors


@dataclass(frozen=True)
class LogBarState:
    world: int = 0
    shown: int | None = None  # None: all ranks
    follow: bool = True
    wrap: bool = False
    timestamps: bool = False
    grep: str = ""
    grep_error: str | None = None
    matches: int | None = None  # lines kept by the filter (while scanning: found so far)
    scanning: bool = False
    scanned: float = 0.0  # while scanning: the share of the run's files read
    lines: int = 0
    note: str | None = None  # e.g. showing an excerpt of a file
    grid: bool = False  # a pane per rank
    hide_probes: bool = True  # the engine's access-log lines of sparktui's probes are hidden
    hidden: int = 0  # probe lines hidden from what is shown


class LogBar(Static):
    DEFAULT_CSS = """
    LogBar {
        width: 1fr;
        height: 1;
        background: $panel;
        color: $foreground;
        padding: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.state = LogBarState()
        self._painted: LogBarState | None = None  # the state the text shows

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.show(self.state, force=True))

    def show(self, state: LogBarState, *, force: bool = False) -> None:
        self.state = state
        if state == self._painted and not force:
            return
        self._painted = state
        # One row, as wide as the panel: new text never changes its size, so no layout (that
        # was a layout of the whole screen at every batch of lines under a flood).
        self.update(self.render_state(state), layout=False)

    def render_state(self, s: LogBarState) -> Text:
        colors = rank_colors(self.app.theme_variables)
        variables = theme_colors(self.app.theme_variables)
        out = Text(no_wrap=True, overflow="ellipsis")
        views = [("all", None), *((f"r{r}", r) for r in range(s.world))]
        for label, rank in views:
            style = colors[rank % len(colors)] if rank is not None else ""
            if rank == s.shown:
                out.append(f"[{label}]", f"bold reverse {style}".strip())
            else:
                out.append(f" {label} ", style)
        out.append("  ")
        if s.note:
            out.append(s.note, f"bold {variables.get('accent', '')}".strip())
        elif s.grep_error:
            out.append(visible(s.grep_error), f"bold {variables.get('error', 'red')}")  # quotes the pattern
        elif s.grep and s.matches is not None:
            inverted = s.grep.startswith("!")
            noun = ("line" if s.matches == 1 else "lines") if inverted else \
                ("match" if s.matches == 1 else "matches")
            more = "+" if s.scanning else ""
            out.append(f"{s.matches:,}{more} {noun}", f"bold {variables.get('accent', '')}".strip())
            if s.scanning:
                out.append(f" · scanning the run's files {s.scanned:.0%}", variables.get("text-muted", ""))
        elif s.grep and s.scanning:
            out.append("scanning the run's files…", variables.get("text-muted", ""))
        else:
            out.append(f"{s.lines:,} lines", variables.get("text-muted", ""))
            if s.hidden:
                out.append(f" · {s.hidden:,} probe line{'' if s.hidden == 1 else 's'} hidden",
                           variables.get("text-muted", ""))
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
        out.append(" · ".join(flags), variables.get("text-muted", "") if s.follow else
                   f"bold {variables.get('warning', 'yellow')}")
        return out
