"""A boot that hangs on one rank, on the real 4-node test cluster: the seed recipe with the demo
engine as its stand-in, rank 2 silent after its NCCL line while the others go on loading.
Within ``[boot] stall`` seconds ``up --wait``, ``status`` and the console name rank 2, its last
line and how long ago; every rank's silence is in the ranks table and ``status``; the boot still
ends by its timeout, the stall named in the failure."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.core.runstore import ts_epoch
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.conftest import ROOT
from tests.realparts.test_seed_checks import SLUG, seed_checkpoints, seed_on_demo
from tests.runner import Cli, sparktui_cli, state_env
from tests.ui.conftest import wait_for

pytestmark = pytest.mark.realparts

STALL_S = 3
TIMEOUT_S = 12
NCCL = "NCCL INFO comm 0x7f3a5c0002 rank 2 nranks 4"


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stall-state")


@pytest.fixture(scope="module")
def recipe(testbed: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    seed_checkpoints(testbed)
    return seed_on_demo(tmp_path_factory.mktemp("recipes") / SLUG, [
        ('[boot]\ntimeout = "20m"\n', f'[boot]\ntimeout = "{TIMEOUT_S}s"\nstall = "{STALL_S}s"\n'),
        ('DSV41_LAUNCHER = "tp4"\n', 'DSV41_LAUNCHER = "tp4"\nSPARKTUI_DEMO_HANG_RANK = "2"\n'
                                     'SPARKTUI_DEMO_BOOT_SECONDS = "7"\n'),
    ])


@pytest.fixture(scope="module")
def cli(testbed: Any, recipe: Path, state: Path) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, state_env(state), recipe)
    yield run
    run("down")


def test_up_wait_and_status_name_the_silent_rank(cli: Cli, testbed: Any, recipe: Path,
                                                 state: Path) -> None:
    env = {**state_env(state)}
    argv = [sys.executable, "-m", "sparktui", "up", str(recipe), "--wait",
            "--cluster", testbed.cluster_file]
    up = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    seen: dict[str, Any] | None = None
    seen_text: str | None = None
    try:
        end = time.monotonic() + TIMEOUT_S + 60
        while up.poll() is None and time.monotonic() < end:
            status = json.loads(cli("status", "--json").stdout)
            if status["stall"] is not None and status["stall"]["rank"] == 2 and seen is None:
                seen = status
                seen_text = cli("status").stdout
            time.sleep(0.5)
        out, err = up.communicate(timeout=60)
    finally:
        if up.poll() is None:
            up.kill()
    assert up.returncode == 1, out + err
    # up --wait said it while waiting: rank 2, after which line, how long, the others' line
    said = [line for line in err.splitlines() if line.startswith("warning: boot stalled: rank 2 silent for")]
    assert said, err
    assert NCCL in said[0].split("after `")[1].split("`")[0], said  # the line it stopped after
    assert "went on to `" in said[0] and "Loading safetensors checkpoint shards" in said[0], said
    # and the boot ended by its timeout, the stall named in each booting rank's failure
    failure = next(line for line in err.splitlines() if line.startswith("rank 2 (node2): failed"))
    assert f"boot timed out after {TIMEOUT_S} s: " in failure and NCCL in failure, failure
    assert "rank 2 went quiet first" in failure or "rank 2 silent for" in failure, failure
    assert "first failure: rank 2 (" in err, err
    # status saw it during the boot, with every rank's silence and last line
    assert seen is not None, "status never named the stall"
    assert NCCL in seen["stall"]["after"]
    ranks = seen["ranks"]
    assert seen_text is not None and "quiet" in seen_text and "r2 quiet " in seen_text and NCCL in seen_text, seen_text
    assert all(isinstance(r["silent_s"], (int, float)) for r in ranks), ranks
    assert ranks[2]["silent_s"] >= STALL_S and NCCL in ranks[2]["last_line"]
    assert min(r["silent_s"] for i, r in enumerate(ranks) if i != 2) < STALL_S
    # within the stall time: the run's event came at most a tick or two after STALL_S of silence
    run_dir = state / "sparktui" / "runs" / seen["run"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    stalls = [e for e in events if e.get("kind") == "stall"]
    assert stalls and stalls[0]["rank"] == 2 and stalls[0]["silent_s"] < STALL_S + 2.5, stalls
    log2 = (run_dir / "r2.log").read_text().splitlines()
    nccl_at = ts_epoch(next(line for line in log2 if NCCL in line).split("\t")[0])
    said_at = ts_epoch(stalls[0]["ts"])
    assert nccl_at is not None and said_at is not None
    assert STALL_S <= said_at - nccl_at < STALL_S + 2.5, (said_at - nccl_at, stalls[0])


async def test_console_names_the_silent_rank(cli: Cli, testbed: Any, recipe: Path,
                                             state: Path) -> None:
    cli("down")
    options = ConsoleOptions([recipe.parent], Path(testbed.cluster_file),
                             state_root=state / "sparktui", recipe=SLUG, remember=False,
                             cursor_blink=False)
    app = SparkApp(options)
    async with app.run_test(size=(160, 48)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 30, "the seed to open on the test cluster")
        await pilot.press("u")
        table = main.ranks_table
        await wait_for(pilot, lambda: 2 in table.stalled, 90, "rank 2 named stalled")
        assert table.stalled[0] == 2
        notes = [n.text for n in main.state.notices if "boot stalled" in n.text]
        assert notes and notes[0].startswith("boot stalled: rank 2 silent for") and NCCL in notes[0]
        await pilot.pause(1.2)  # the once-a-second paint
        quiet = {r: str(table.get_cell(str(r), "quiet")) for r in range(4)}
        assert all(q != "-" for q in quiet.values()), quiet
        assert int(quiet[2].rstrip("s").split("m")[-1]) >= STALL_S or "m" in quiet[2], quiet
        await pilot.press("q")
