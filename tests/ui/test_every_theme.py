"""Every theme the console can switch to renders every widget: Textual's built-in ANSI themes
name colours ("ansi_green", "#00000000") that Rich cannot parse as they are. Found by the
console fuzz (seed 100: the palette's theme picker chose ansi-dark and the log bar crashed)."""

from __future__ import annotations

from collections.abc import Callable

from textual.theme import BUILTIN_THEMES

from sparktui.backend.events import LogBatch, RankChanged
from sparktui.core.ranks import RankSnapshot
from sparktui.ui.app import SparkApp
from sparktui.ui.messages import BackendEvent
from tests.ui.conftest import wait_for


async def test_every_theme_renders(offline_app: Callable[..., SparkApp]) -> None:
    app = offline_app()
    async with app.run_test(size=(140, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 10, "the recipe")
        assert main.session is not None
        for rank in range(4):
            node = main.session.plan.ranks[rank].node
            main.post_message(BackendEvent(RankChanged(RankSnapshot(rank, node, "failed", "exited"))))
            main.post_message(BackendEvent(LogBatch("offline", rank, [(1, "2026-01-01T00:00:00Z", "x")])))
        await pilot.press("slash", "x", "enter", "g")
        for name in [*BUILTIN_THEMES, *app.theme_names]:
            app.theme = name
            await pilot.pause()
            assert app.theme == name
