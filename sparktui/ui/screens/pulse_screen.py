"""The pulse view: the engines' own numbers (``Orchestrator.metrics``: every rank that serves
them, scraped at ``[metrics] interval``), per rank and for the group, with sparklines of the last
minutes and how old each reading is; a stale rank keeps its last values and says why."""

from __future__ import annotations

import time
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Static

from sparktui.backend.metrics import HISTORY, MetricsScraper
from sparktui.core.metrics import PulseKey
from sparktui.core.units import format_duration
from sparktui.ui.outside import content
from sparktui.ui.widgets.pulse_row import PulseRow

REPAINT_S = 1.0
"""The ages move every second, whether a scrape came or not."""
SPANS = (HISTORY, HISTORY // 5)


class PulseScreen(Screen[None]):
    """A screen of its own, not a dialog over the main screen: under a log flood a dialog has
    the flooding screen composed beneath it for every frame (p95 224 ms from key to screen with
    8 ranks flooding, bench/ui_flood.py --pulse), a screen of its own only itself."""

    DEFAULT_CSS = """
    PulseScreen { background: $background; }
    PulseScreen #pulse-box { border: round $accent; padding: 0 1; height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,P", "close", "close", id="pulse-close"),
        Binding("z", "span", "span", id="pulse-span"),
    ]

    span: reactive[int] = reactive(SPANS[0])
    """Readings the sparklines show: the last ten minutes at 5 s, or the last two."""

    def __init__(self, title: str, scraper: MetricsScraper, nodes: dict[int, str]) -> None:
        super().__init__()
        self.title_text = title
        self.scraper = scraper
        self.nodes = nodes
        self.keys: tuple[PulseKey, ...] = tuple(dict.fromkeys(s.key for s in scraper.spec.series))
        self._composed: tuple[int, ...] = ()  # the ranks the last compose laid out
        self._rows: tuple[int, ...] | None = None
        """The ranks whose rows are mounted (None: not yet, or being laid out again): the
        scraper may learn its ranks after the screen opened (a launch under way), and a repaint
        then lays the rows out again instead of looking for rows that are not there."""

    def compose(self) -> ComposeResult:
        with Vertical(id="pulse-box") as dialog:
            dialog.border_title = content(self.title_text)
            dialog.border_subtitle = "z span · esc close"
            yield Static(id="pulse-status")
            self._composed = tuple(self.scraper.ranks)
            with VerticalScroll(id="pulse-rows"):
                for rank in self._composed:
                    yield PulseRow(f"r{rank} {self.nodes.get(rank, '?')}", self.keys,
                                   id=f"pulse-r{rank}")
                if len(self._composed) > 1:
                    yield PulseRow("group", self.keys, id="pulse-group")

    def action_close(self) -> None:
        if self.app.screen is self:  # once: a second key would pop the main screen
            self.dismiss()

    def action_span(self) -> None:
        self.span = SPANS[(SPANS.index(self.span) + 1) % len(SPANS)]

    def watch_span(self) -> None:
        self.repaint()

    def on_mount(self) -> None:
        self._rows = self._composed
        self.repaint()
        self.set_interval(REPAINT_S, self.repaint)

    async def _again(self) -> None:
        await self.recompose()
        self._rows = self._composed  # the rows are there once mounted, not once composed: a
        self.repaint()  # repaint meanwhile (the timer, a scrape) waits (CI met NoMatches)

    def repaint(self) -> None:
        """Every row from the scraper's pulses (called on each ``MetricsChanged`` too)."""
        if not self.is_attached or self._rows is None:
            return
        if self._rows != tuple(self.scraper.ranks):
            self._rows = None  # once: until the new rows are composed
            self.call_later(self._again)
            return
        now = time.monotonic()
        every = self.scraper.interval or 0.0
        self.query_one("#pulse-status", Static).update(content(
            f"scraped every {every:g} s through each node's connection · sparklines: the last "
            f"{format_duration(every * self.span)}"))
        for rank in self.scraper.ranks:
            row = self.query_one(f"#pulse-r{rank}", PulseRow)
            pulse = self.scraper.pulses.get(rank)
            if pulse is None:
                row.show({}, {}, "not scraped yet", stale=False)
                continue
            history = {k: pulse.history(k)[-self.span:] for k in self.keys}
            if pulse.stale is not None:
                age = (f", last good {format_duration(now - pulse.last_ok)} ago"
                       if pulse.last_ok is not None else "")
                said = f"stale{age}: {pulse.stale}"
            elif pulse.last_ok is not None:
                said = f"scraped {format_duration(now - pulse.last_ok)} ago"
            else:
                said = "not scraped yet"
            row.show(pulse.values(), history, said, stale=pulse.stale is not None)
        if len(self._rows) > 1:
            group = self.query_one("#pulse-group", PulseRow)
            group.show(self.scraper.group(),
                       {k: v[-self.span:] for k, v in self.scraper.group_history().items()},
                       "all ranks",
                       stale=all(p.stale is not None for p in self.scraper.pulses.values()))
