"""Did every flag take effect, in the console and ``status`` on the local cluster: demo-tp4's
ranks print SGLang's dump of their arguments; each rank's args row says "N/N took effect", and
with the demo told to clamp ``--max-running-requests`` on rank 2 the row shows both values."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.widgets.checks_panel import ChecksPanel
from tests.conftest import RECIPES
from tests.ui.conftest import sparktui, wait_for

SIZE = (160, 48)


def args_rows(panel: ChecksPanel) -> dict[int, tuple[str, list[str]]]:
    """Per rank: its args row's text and its marks per rank column."""
    checks = panel.checks
    assert checks is not None
    out = {}
    for c in checks.checks:
        if c.kind == "args":
            assert isinstance(c.ranks, list)
            marks = [str(panel.get_cell(str(c.id), f"r{r}")) for r in range(4)]
            out[c.ranks[0]] = (str(panel.get_cell(str(c.id), "check")), marks)
    return out


async def boot(app: SparkApp) -> ChecksPanel:
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
        await pilot.press("u")
        table = main.ranks_table
        await wait_for(pilot, lambda: [table.states.get(r) for r in range(4)] == ["ready"] * 4, 40,
                       "every rank ready")
        assert main.session is not None
        orch = main.session.orch
        await wait_for(pilot, lambda: all(orch.checks.report(r) is not None for r in range(4)), 15,
                       "every rank's args verdicts")
        panel = main.checks_panel
        if not panel.display:
            await pilot.press("c")
        await pilot.pause(0.3)
        assert panel.display
        rows = args_rows(panel)
        row, top = panel.cursor_coordinate.row, round(panel.scroll_y)
        shown = range(top, top + panel.scrollable_content_region.height - panel.header_height)
        panel.cursor_seen = (row, row in shown)  # type: ignore[attr-defined]
        await pilot.resize_terminal(60, 20)  # a short terminal: the panel leaves the logs lines
        await pilot.pause(0.3)
        panel.log_rows_seen = main.logs.query_one("#log-view").size.height  # type: ignore[attr-defined]
        app.exit()
    panel.rows_seen = rows  # type: ignore[attr-defined]
    return panel


async def test_demo_tp4_every_rank_args_took_effect() -> None:
    app = SparkApp(ConsoleOptions([RECIPES], None, state_root=state_dir(), recipe="demo-tp4"))
    try:
        rows = (await boot(app)).rows_seen  # type: ignore[attr-defined]
        assert sorted(rows) == [0, 1, 2, 3]
        for rank, (text, marks) in rows.items():
            m = re.fullmatch(rf"r{rank} (\d+)/(\d+) took effect", text)
            assert m and m[1] == m[2] and int(m[1]) >= 11, text  # args + the launcher's flags
            assert marks[rank] == "✓" and all(mk == "" for r, mk in enumerate(marks) if r != rank)
        status = sparktui("status", "demo-tp4")
        assert status.returncode == 0, status.stderr
        for rank in range(4):
            m = re.search(rf"^rank {rank} args (\d+)/(\d+) took effect$", status.stdout, re.M)
            assert m and m[1] == m[2], status.stdout
        assert "check failed" not in status.stdout
    finally:
        sparktui("down", "demo-tp4")


async def test_the_demos_clamp_shows_in_the_checks_panel(tmp_path: Path) -> None:
    folder = tmp_path / "recipes" / "demo-clamp"
    shutil.copytree(RECIPES / "demo-tp4", folder)
    recipe = folder / "recipe.toml"
    text = recipe.read_text()
    assert text.count("[env]\n") == 1
    recipe.write_text(text.replace("[env]\n", '[env]\nSPARKTUI_DEMO_CLAMP = "max_running_requests=13@2"\n'))
    app = SparkApp(ConsoleOptions([folder.parent], None, state_root=state_dir(), recipe="demo-clamp"))
    try:
        panel = await boot(app)
        rows = panel.rows_seen  # type: ignore[attr-defined]
        text2, marks2 = rows[2]
        failed = next(i for i, c in enumerate(panel.checks.checks)  # type: ignore[union-attr]
                      if c.kind == "args" and c.ranks == [2])
        assert panel.cursor_seen == (failed, True)  # type: ignore[attr-defined]
        assert panel.log_rows_seen >= 3  # type: ignore[attr-defined]
        m = re.fullmatch(r"r2 (\d+)/(\d+) · max_running_requests 16→13", text2)
        assert m and int(m[1]) == int(m[2]) - 1, text2
        assert marks2[2] == "✗"
        assert all(rows[r][1][r] == "✓" and "·" not in rows[r][0] for r in (0, 1, 3))
        status = sparktui("status", str(folder))
        assert "check failed: args on rank 2: " in status.stdout, status.stdout
        assert "1 differs: max_running_requests 16 -> 13" in status.stdout
    finally:
        sparktui("down", str(folder))
