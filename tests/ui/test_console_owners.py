"""The console of a second operator shows the first one's run of the same recipe as theirs (who,
since when), and its ``u`` starts nothing over it. Real demo ranks on the local cluster; two
cluster files that differ only in ``owner`` stand for the two operators."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.geometry import Region

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.widgets.rank_detail import RankDetail
from tests.cli.test_owners import cluster_file
from tests.conftest import RECIPES, ROOT
from tests.ui.conftest import DEMO, wait_for


def cli(cluster: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparktui", args[0], DEMO, "--cluster", str(cluster),
                           *args[1:]], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[dict[str, Path]]:
    files = {name: cluster_file(tmp_path, f"{name}@jump") for name in ("alice", "bob")}
    yield files
    cli(files["alice"], "down", "--adopt")


async def test_the_console_shows_another_owners_run_and_leaves_it(clusters: dict[str, Path]) -> None:
    up = cli(clusters["alice"], "up", "--wait")
    assert up.returncode == 0, up.stderr
    ids = [r["container_id"] for r in json.loads(cli(clusters["alice"], "status", "--json").stdout)["ranks"]]

    app = SparkApp(ConsoleOptions([RECIPES], clusters["bob"], state_root=state_dir(), recipe=DEMO,
                                  remember=False, cursor_blink=False))
    async with app.run_test(size=(160, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 20, "the recipe to open")
        await wait_for(pilot, lambda: any("has containers of another owner" in n.text
                                          for n in main.state.notices), 10, "the notice")
        [notice] = [n for n in main.state.notices if "has containers of another owner" in n.text]
        assert notice.level == "warning"
        assert "demo-tp4 on cluster shared has containers of another owner: alice@jump since " \
               in notice.text and "(ranks 0, 1, 2, 3, running)" in notice.text, notice.text
        assert "you are bob@jump" in notice.text
        assert main.session is not None and not main.session.attached
        await wait_for(pilot, lambda: all(main.state.ranks.get(r) is not None for r in range(4)), 5,
                       "every rank reported")
        for r in range(4):
            snap = main.state.ranks[r]
            assert snap.state == "pending" and snap.container_id is None
            assert snap.detail.startswith("held by alice@jump since ") and \
                snap.detail.endswith("(running; not yours)"), snap.detail
        detail = main.query_one(RankDetail)
        await wait_for(pilot, lambda: "held by alice@jump" in "".join(
            s.text for s in detail.render_lines(Region(0, 0, *detail.size))), 5, "the rank detail")

        await pilot.press("u")
        await wait_for(pilot, lambda: any(n.level == "error" and n.text.startswith("up: ")
                                          for n in main.state.notices), 20, "up's answer")
        [said] = [n.text for n in main.state.notices if n.text.startswith("up: ")]
        assert said.startswith("up: demo-tp4 is already on cluster shared, started by alice@jump "), said
        assert "nothing was started" in said
        assert all(main.state.ranks[r].state == "pending" for r in range(4))
        await pilot.press("q")

    status = json.loads(cli(clusters["alice"], "status", "--json").stdout)
    assert [r["container_id"] for r in status["ranks"]] == ids
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
