"""What the console shows of a node's or a container's words: their control characters written
out, never obeyed by the terminal (the recipe pane and plan dialog: test_console_recipes.py; the
log view: test_log_view.py)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.geometry import Region

from sparktui.backend.events import NodeTelemetry
from sparktui.core.ranks import RankSnapshot
from sparktui.ui.widgets.nodes_panel import NodesPanel
from sparktui.ui.widgets.rank_detail import RankDetail


async def test_a_rank_detail_quoting_a_container_shows_its_escapes_as_text() -> None:
    """A failed rank's detail is often a line of its container (an engine's fatal line)."""
    class DetailApp(App[None]):
        def compose(self) -> ComposeResult:
            yield RankDetail()

    app = DetailApp()
    async with app.run_test(size=(100, 3)) as pilot:
        detail = app.query_one(RankDetail)
        detail.show(RankSnapshot(0, "node1", "failed", detail="fatal: \x1b]0;pwned\x07 [/red]x"))
        await pilot.pause()
        shown = "".join(s.text for s in detail.render_lines(Region(0, 0, *detail.size)))
        assert "fatal: \\x1b]0;pwned\\x07 [/red]x" in shown, shown
        assert "\x1b" not in shown and "\x07" not in shown


async def test_a_node_that_answers_with_escapes_shows_them_as_text() -> None:
    class NodesApp(App[None]):
        def compose(self) -> ComposeResult:
            yield NodesPanel()

    app = NodesApp()
    async with app.run_test(size=(120, 6)) as pilot:
        panel = app.query_one(NodesPanel)
        panel.setup(["node1"])
        panel.update_node(NodeTelemetry("node1", "unreachable", detail="ssh: \x1b[2J[/red]gone"))
        await pilot.pause()
        shown = "".join(s.text for s in panel.render_lines(Region(0, 0, *panel.size)))
        assert "ssh: \\x1b[2J[/red]gone" in shown, shown
        assert "\x1b" not in shown
