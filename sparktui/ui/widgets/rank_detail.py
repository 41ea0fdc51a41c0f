"""One line under the rank table about the selected rank: node, state, container, exit code and
the detail of its last change (why it failed)."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from sparktui.core.controls import visible
from sparktui.core.ranks import RankSnapshot
from sparktui.ui.colors import theme_colors
from sparktui.ui.formatting import state_style
from sparktui.ui.widgets.one_line import middle_cut


class RankDetail(Widget):
    """Made at each paint for the width it has: the detail (a failure about a long path, an
    engine's last lines) is cut in its middle so its end shows. A Static wrapped it at a word
    and the line is one row high: "staging: local0: checkpoint folder" and nothing more."""

    DEFAULT_CSS = """
    RankDetail { height: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snap: RankSnapshot | None = None
        self.rank: int | None = None
        self.node = ""

    def show(self, snap: RankSnapshot | None, rank: int | None = None, node: str = "") -> None:
        """``snap``: the rank as last reported; before any report, ``rank`` on ``node`` shows
        "-" (nothing known yet); neither: nothing selected."""
        self.snap, self.rank, self.node = snap, rank, node
        self.refresh()

    def render(self) -> Text:
        snap = self.snap
        text = Text(no_wrap=True, end="")
        if snap is None:
            if self.rank is not None:
                text.append(f"r{self.rank} ", "bold")
                text.append(f"{self.node} -")
            return text
        v = theme_colors(self.app.theme_variables)
        text.append(f"r{snap.rank} ", "bold")
        text.append(f"{snap.node} ")
        text.append(snap.state, state_style(snap.state, v))
        if snap.container_id:
            text.append(f" · {snap.container_id[:18]}", v.get("text-muted", ""))
        if snap.exit_code is not None:
            text.append(f" · exit {snap.exit_code}")
        width = self.content_size.width
        if snap.detail:  # may quote a container: shown, not obeyed
            text.append(f" · {middle_cut(visible(snap.detail), max(width - text.cell_len - 3, 1))}")
        text.truncate(width, overflow="ellipsis")  # narrow: the container id is cut, not wrapped away
        return text
