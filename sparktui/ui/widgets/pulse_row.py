"""One row of the pulse view: a rank (or the group), each of its engine's series as its current
value, coloured by the series' thresholds, over a sparkline of the last minutes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual import events
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.css.query import NoMatches
from textual.widgets import Sparkline, Static

from sparktui.core.metrics import LABELS, PulseKey, level, shown
from sparktui.ui.outside import content

CELL_WIDTH = 16
"""Columns a series needs ("prompt 12k tok/s", "TTFT p95 12.3 s", its sparkline beneath): a
narrow terminal puts fewer series on a line and wraps the rest, rather than cutting every value
off."""


class PulseRow(Vertical):
    """``name``: "r0 spark1" or "group" (a node name is outside text: shown as text)."""

    DEFAULT_CSS = """
    PulseRow { height: auto; margin-bottom: 1; }
    PulseRow > .pulse-head { height: 1; }
    PulseRow > Grid { height: auto; grid-rows: auto; grid-gutter: 0 1; }
    PulseRow .pulse-cell { height: auto; }
    PulseRow .pulse-value { height: 1; }
    PulseRow .pulse-value.-warn { color: $warning; }
    PulseRow .pulse-value.-bad { color: $error; text-style: bold; }
    PulseRow .pulse-value.-ok { color: $success; }
    PulseRow Sparkline { height: 2; }
    PulseRow.-stale .pulse-value, PulseRow.-stale Sparkline { opacity: 60%; }
    """

    def __init__(self, name: str, keys: Sequence[PulseKey], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.row_name = name
        self.keys = tuple(keys)
        self._shown: dict[str, object] = {}  # what each part shows now: unchanged, not redone

    def compose(self) -> ComposeResult:
        yield Static(content(self.row_name), classes="pulse-head")
        with Grid():
            for key in self.keys:
                with Vertical(classes="pulse-cell"):
                    yield Static(f"{LABELS[key]} -", classes="pulse-value", id=f"value-{key}")
                    yield Sparkline([], id=f"spark-{key}")

    def on_resize(self, event: events.Resize) -> None:
        columns = max(1, min(len(self.keys), (event.size.width + 1) // (CELL_WIDTH + 1)))
        self.query_one(Grid).styles.grid_size_columns = columns

    def _changed(self, part: str, now: object) -> bool:
        if self._shown.get(part) == now:
            return False
        self._shown[part] = now
        return True

    def show(self, values: Mapping[PulseKey, float | None],
             history: Mapping[PulseKey, Sequence[float]], said: str, stale: bool) -> None:
        """The row's numbers now; ``said``: how old its last scrape is, or why it is stale. Only
        what changed is updated: the view repaints every second and on every scrape, under a
        log flood too."""
        try:
            self._show(values, history, said, stale)
        except NoMatches:  # its parts being composed or removed (the screen lays its rows out
            self._shown.clear()  # again): all of it at the next repaint, a second later

    def _show(self, values: Mapping[PulseKey, float | None],
              history: Mapping[PulseKey, Sequence[float]], said: str, stale: bool) -> None:
        if self._changed("stale", stale):
            self.set_class(stale, "-stale")
        head = f"{self.row_name} · {said}"
        if self._changed("head", head):
            self.query_one(".pulse-head", Static).update(content(head))
        for key in self.keys:
            value = values.get(key)
            text, lvl = f"{LABELS[key]} {shown(key, value)}", level(key, value)
            if self._changed(f"value-{key}", (text, lvl)):
                cell = self.query_one(f"#value-{key}", Static)
                cell.update(text)
                for name in ("ok", "warn", "bad"):
                    cell.set_class(lvl == name, f"-{name}")
            data = list(history.get(key, ()))
            if len(data) == 1:  # Textual draws a lone reading as a full bar: a flat line instead
                data *= 2
            if self._changed(f"spark-{key}", data):
                self.query_one(f"#spark-{key}", Sparkline).data = data
