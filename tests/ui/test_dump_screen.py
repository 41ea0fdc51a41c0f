"""The dump screen shows every rank's dump rank by rank, the ranks' words as plain text (a
stack line or a process's arguments that look like markup are shown as written, an escape
sequence written out), and says why when there is nothing to dump."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widgets import Static

from sparktui.backend.dumps import DumpResult, RankDump
from sparktui.core.errors import SparkError
from sparktui.core.procs import Proc
from sparktui.ui.app import SparkApp
from sparktui.ui.screens.dump_screen import DumpScreen
from tests.ui.conftest import wait_for

HOSTILE = '  File "/x/[bold red]boom[/].py", line 3 in \x1b]0;owned\x07run'


def _dump(rank: int) -> RankDump:
    return RankDump(rank, f"node{rank}", "py-spy", ["Thread 0x1 (idle): \"MainThread\"", HOSTILE], "",
                    [Proc(7, "S", 3.0, "python3", "python3 -m engine --flag [link=x]y[/link]")],
                    ["[red]a line[/red]"], 0.2, engine_pid=7)


async def test_every_rank_shown_as_plain_text(offline_app: Callable[..., SparkApp], tmp_path: Path) -> None:
    app = offline_app()

    async def run() -> DumpResult:
        return DumpResult(tmp_path / "dumps" / "x", [_dump(r) for r in range(2)], 0.3)

    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        screen = DumpScreen("dump · demo", run)
        app.push_screen(screen)
        await wait_for(pilot, lambda: screen.result is not None, 5, "the dump")
        await pilot.pause()
        shown = str(screen.query_one("#dump-text", Static).render())
        assert "rank 0 on node0 · stacks by py-spy" in shown and "rank 1 on node1" in shown
        assert "[bold red]boom[/].py" in shown and "[link=x]y[/link]" in shown
        assert "[red]a line[/red]" in shown
        assert "\x1b" not in shown and "\\x1b" in shown
        assert "2 ranks in 0.30 s" in str(screen.query_one("#dump-status", Static).render())


async def test_a_dump_that_cannot_be_made_says_why(offline_app: Callable[..., SparkApp]) -> None:
    app = offline_app()

    async def run() -> DumpResult:
        raise SparkError("no run of this recipe to dump; start it with up")

    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "the recipe")
        screen = DumpScreen("dump · demo", run)
        app.push_screen(screen)
        await wait_for(pilot, lambda: bool(screen.query("#dump-status")), 5, "the screen")
        status = screen.query_one("#dump-status", Static)
        await wait_for(pilot, lambda: "dump failed" in str(status.render()), 5, "the sentence")
        assert "start it with up" in str(status.render())
