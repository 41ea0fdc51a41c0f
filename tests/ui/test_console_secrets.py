"""The console on a demo run whose engine prints its API key and HF_TOKEN at boot: the log
view, what it keeps and what it paints, holds the mask, never either value (the local cluster:
fixed ports, run it in a private network namespace)."""

from __future__ import annotations

from pathlib import Path

from textual.geometry import Region

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.logstore import TEXT
from sparktui.ui.options import ConsoleOptions
from tests.runner import secret_demo
from tests.ui.conftest import sparktui, wait_for

API_KEY = "sk-console-secret-5150"
HF_TOKEN = "hf_console_token_6161"


async def test_the_log_view_shows_the_mask_never_the_secrets(tmp_path: Path) -> None:
    recipe = secret_demo(tmp_path / "recipes", api_key=API_KEY, hf_token=HF_TOKEN)
    app = SparkApp(ConsoleOptions([recipe.parent], None, state_root=state_dir(),
                                  recipe=recipe.name, remember=False))
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            main = app.main_screen
            await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
            await pilot.press("u")
            await wait_for(pilot, lambda: [main.ranks_table.states.get(r) for r in range(4)]
                           == ["ready"] * 4, 40, "every rank ready")
            main.logs.apply_grep_now("ServerArgs")
            await wait_for(pilot, lambda: len(main.logs.view.lines) == 4, 10, "4 ServerArgs lines")
            kept = [line[TEXT] for r in range(4) for line in main.store.lines(r)]
            assert all("api_key='********'" in line[TEXT] and "hf_token='********'" in line[TEXT]
                       for line in main.logs.view.lines)
            view = main.logs.view
            painted = "".join(s.text for s in view.render_lines(Region(0, 0, *view.size)))
            assert "ServerArgs(" in painted
            screen = app.export_screenshot()
            for text in ("\n".join(kept), painted, screen):
                assert API_KEY not in text and HF_TOKEN not in text
    finally:
        sparktui("down", str(recipe), timeout=60)
