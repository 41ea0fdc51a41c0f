"""The selected rank's line under the ranks table: what it shows of a container's words."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.geometry import Region

from sparktui.core.ranks import RankSnapshot
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
