"""The main screen's keys that only change what the log panel shows: grep, matches, which
ranks, side by side, follow, wrap, timestamps, health probe lines, and the panels beside the log.

A mixin of ``MainScreen``: its bindings come from the one key table (``ui/keys.py``), whose
actions resolve on the screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from sparktui.ui.logstore import LogStore
    from sparktui.ui.widgets.checks_panel import ChecksPanel
    from sparktui.ui.widgets.log_panel import LogPanel
    from sparktui.ui.widgets.nodes_panel import NodesPanel
    from sparktui.ui.widgets.rank_table import RankTable


class LogKeys:
    """Actions over the log panel; the screen provides the widgets."""

    store: LogStore
    _nodes_shown: bool | None

    if TYPE_CHECKING:
        @property
        def logs(self) -> LogPanel: ...
        @property
        def ranks_table(self) -> RankTable: ...
        @property
        def checks_panel(self) -> ChecksPanel: ...
        @property
        def nodes_panel(self) -> NodesPanel: ...
        def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
                   timeout: float | None = None, markup: bool = True) -> None: ...

    def action_grep(self) -> None:
        self.logs.open_grep()

    def action_next_match(self) -> None:
        self._step(True)

    def action_prev_match(self) -> None:
        self._step(False)

    def _step(self, forward: bool) -> None:
        if not self.logs.model.line_filter.active:
            self.notify("Grep first: press / and type a regex", severity="information", timeout=3,
                        markup=False)
            return
        if not self.logs.step_match(forward, self.ranks_table.selected_rank):
            self.notify("No more matches " + ("below" if forward else "above"), timeout=2, markup=False)

    def action_show_rank(self, rank: int) -> None:
        if rank < 0:
            self.logs.show_ranks(None)
            return
        if rank >= self.store.world:
            self.notify(f"There is no rank {rank}", severity="warning", timeout=3, markup=False)
            return
        self.ranks_table.select(rank)
        self.logs.show_ranks(rank)

    def action_escape(self) -> None:
        logs, model = self.logs, self.logs.model
        if model.pending_filter.text or model.line_filter.text:
            logs.clear_grep()
        elif model.excerpt is not None:
            logs.toggle_follow()  # leaves the excerpt for the live log
        elif not all(view.follow for view in logs.views()):
            logs.follow_all()

    async def action_toggle_grid(self) -> None:
        await self.logs.toggle_grid(list(self.ranks_table.nodes))

    def action_toggle_follow(self) -> None:
        self.logs.toggle_follow()

    def action_toggle_wrap(self) -> None:
        self.logs.toggle_wrap()

    def action_toggle_timestamps(self) -> None:
        self.logs.toggle_timestamps()

    def action_toggle_probes(self) -> None:
        self.logs.toggle_probes()

    def action_checks(self) -> None:
        panel = self.checks_panel
        if not panel.display:
            panel.display = True
            panel.focus()
        elif not panel.has_focus:
            panel.focus()
        else:
            panel.display = False
            self.logs.focus_view()

    def action_toggle_nodes(self) -> None:
        self._nodes_shown = not self.nodes_panel.display
        self.nodes_panel.display = self._nodes_shown
