"""One line under the rank table about the selected rank: node, state, container, exit code and
the detail of its last change (why it failed)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from sparktui.core.controls import visible
from sparktui.core.ranks import RankSnapshot
from sparktui.ui.colors import theme_colors
from sparktui.ui.formatting import state_style


class RankDetail(Static):
    def show(self, snap: RankSnapshot | None, rank: int | None = None, node: str = "") -> None:
        """``snap``: the rank as last reported; before any report, ``rank`` on ``node`` shows
        "-" (nothing known yet); neither: nothing selected."""
        if snap is None and rank is None:
            self.update("")
            return
        v = theme_colors(self.app.theme_variables)
        text = Text(no_wrap=True, overflow="ellipsis")
        if snap is None:
            text.append(f"r{rank} ", "bold")
            text.append(f"{node} -")
            self.update(text)
            return
        text.append(f"r{snap.rank} ", "bold")
        text.append(f"{snap.node} ")
        text.append(snap.state, state_style(snap.state, v))
        if snap.container_id:
            text.append(f" · {snap.container_id[:18]}", v.get("text-muted", ""))
        if snap.exit_code is not None:
            text.append(f" · exit {snap.exit_code}")
        if snap.detail:
            text.append(f" · {visible(snap.detail)}")  # may quote a container: shown, not obeyed
        self.update(text)
