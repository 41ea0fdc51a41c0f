"""What the console shows of a node's or a container's words: their control characters written
out, never obeyed by the terminal (the recipe pane and plan dialog: test_console_recipes.py; the
log view: test_log_view.py)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widget import Widget

from sparktui.backend.events import NodeTelemetry
from sparktui.core.ranks import RankSnapshot
from sparktui.ui.widgets.nodes_panel import NodesPanel
from sparktui.ui.widgets.rank_detail import RankDetail


class OneWidget(App[None]):
    """The widget alone, as the console lays it out."""

    def __init__(self, widget: Widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def shown(widget: Widget) -> str:
    """What the widget paints, as one string."""
    return "".join(s.text for s in widget.render_lines(Region(0, 0, *widget.size)))


async def test_a_rank_detail_quoting_a_container_shows_its_escapes_as_text() -> None:
    """A failed rank's detail is often a line of its container (an engine's fatal line)."""
    detail = RankDetail()
    async with OneWidget(detail).run_test(size=(100, 3)) as pilot:
        detail.snap = RankSnapshot(0, "node1", "failed", detail="fatal: \x1b]0;pwned\x07 [/red]x")
        await pilot.pause()
        text = shown(detail)
        assert "fatal: \\x1b]0;pwned\\x07 [/red]x" in text, text
        assert "\x1b" not in text and "\x07" not in text


async def test_a_long_rank_detail_keeps_its_end_on_its_one_line() -> None:
    """A staging failure about a long path: what is wrong is at the end of the sentence."""
    detail = RankDetail()
    why = ("staging: local0: checkpoint folder /home/op/.cache/huggingface/hub/models--deepseek-ai"
           "--DeepSeek-V4.1-Flash/snapshots/dba1be0a40aa45a94ad051997016db3960a90277 does not exist")
    async with OneWidget(detail).run_test(size=(90, 3)) as pilot:
        detail.snap = RankSnapshot(0, "local0", "failed", detail=why)
        await pilot.pause()
        line = shown(detail)[:90].rstrip()
        assert line.startswith("r0 local0 failed · staging: local0: checkpoint folder "), line
        assert line.endswith(" does not exist") and "…" in line and len(line) <= 90, line
        await pilot.resize_terminal(30, 3)  # narrower than what comes before the detail
        detail.snap = RankSnapshot(0, "local0", "ready", container_id="local-7b62065e74c3")
        await pilot.pause()
        assert shown(detail)[:30].rstrip() == "r0 local0 ready · local-7b620…"


async def test_a_node_that_answers_with_escapes_shows_them_as_text() -> None:
    panel = NodesPanel()
    async with OneWidget(panel).run_test(size=(120, 6)) as pilot:
        panel.setup(["node1"])
        panel.sample = NodeTelemetry("node1", "unreachable", detail="ssh: \x1b[2J[/red]gone")
        await pilot.pause()
        text = shown(panel)
        assert "ssh: \\x1b[2J[/red]gone" in text, text
        assert "\x1b" not in text
