"""One line under the rank table about the selected rank: node, state, container, exit code, its
engine process (pid, state, CPU seconds, a warning) and the detail of its last change (why it
failed)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from sparktui.core.controls import visible
from sparktui.core.ranks import RankSnapshot
from sparktui.ui.formatting import ink, muted_css, state_classes, state_css
from sparktui.ui.widgets.one_line import middle_cut


class RankDetail(Widget):
    """Made at each paint for the width it has: the detail (a failure about a long path, an
    engine's last lines) is cut in its middle so its end shows. A Static wrapped it at a word
    and the line is one row high: "staging: local0: checkpoint folder" and nothing more."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {*state_classes("rank-detail"), "rank-detail--muted"}
    # on the panel: the shades as the panels on the surface draw them (formatting.MUTED)
    DEFAULT_CSS = muted_css("""
    RankDetail {
        height: 1;
        & > .rank-detail--muted { color: $muted; background: $surface; }
    """) + state_css("rank-detail", surface=True) + "\n}"

    snap: reactive[RankSnapshot | None] = reactive(None)
    """The selected rank as last reported."""
    rank: reactive[int | None] = reactive(None)
    """The selected rank, before any report (with ``node``: it shows "-", nothing known yet);
    None, and no ``snap``: nothing selected."""
    node: reactive[str] = reactive("")

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.refresh()  # the state's colour

    def render(self) -> Text:
        snap = self.snap
        text = Text(no_wrap=True, end="")
        if snap is None:
            if self.rank is not None:
                text.append(f"r{self.rank} ", "bold")
                text.append(f"{self.node} -")
            return text
        text.append(f"r{snap.rank} ", "bold")
        text.append(f"{snap.node} ")
        text.append(snap.state, ink(self, f"rank-detail--{snap.state}"))
        if snap.container_id:
            text.append(f" · {snap.container_id[:18]}", ink(self, "rank-detail--muted"))
        if snap.exit_code is not None:
            text.append(f" · exit {snap.exit_code}")
        engine = snap.engine
        if engine is not None and engine.pid is not None:
            text.append(f" · pid {engine.pid} {engine.state} {engine.cpu_s or 0:.0f} CPU s",
                        ink(self, "rank-detail--muted"))
        if engine is not None and engine.warning:  # stopped, or neither CPU nor log moving
            text.append(f" · {engine.warning}", ink(self, "rank-detail--failed"))
        width = self.content_size.width
        if snap.detail:  # may quote a container: shown, not obeyed
            text.append(f" · {middle_cut(visible(snap.detail), max(width - text.cell_len - 3, 1))}")
        text.truncate(width, overflow="ellipsis")  # narrow: the container id is cut, not wrapped away
        return text
