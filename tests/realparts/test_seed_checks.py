"""The seed recipe on the real 4-node test cluster, with ONE extra must-show line that its
engine never prints: ``up --wait`` exits 3 and names that check, ``status`` and
``status --json`` name it, and the console's checks panel shows it failed.

The seed runs as the operator wrote it (args, env, staging, mounts, boot checks) except for
what the test cluster cannot have: the image is the demo image, whose engine is started by a
small shell entrypoint that first prints the seed's must-show lines (the features a real image
reports armed), and ``min_free`` shrinks to this disk. One launch serves every test here.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import docker
import pytest

from sparktui.core.patterns import WILDCARD, compile_pattern
from sparktui.core.plan import LABEL_RECIPE
from sparktui.core.recipe import load_recipe
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.conftest import SEED
from tests.realparts.conftest import IMAGE
from tests.runner import Cli, sparktui_cli, state_env
from tests.staging.ckpt import make_checkpoint
from tests.ui import fuzz, reopen
from tests.ui.conftest import wait_for

pytestmark = pytest.mark.realparts

SLUG = SEED.parent.name
EXTRA = "DSV41 sparktui probe: a feature no image arms ..."



def seed_on_demo(folder: Path, edits: Sequence[tuple[str, str]] = (), tail: str = "") -> Path:
    """The seed, its engine swapped for the demo engine, plus the EXTRA must-show line; then a
    test's own ``edits`` (each ``old`` found once, replaced by ``new``) and ``tail`` appended."""
    text = SEED.read_text()
    shown = [m if isinstance(m, str) else m.pattern for m in load_recipe(SEED).spec.boot.must_show]
    assert shown and not any(p.startswith("re:") for p in shown)
    lines = [p.replace(WILDCARD, "x") for p in shown]
    assert all(compile_pattern(p).search(line) for p, line in zip(shown, lines, strict=True))
    script = ("printf '%s\\n' " + " ".join(shlex.quote(line) for line in lines)
              + '; exec python3 -m sparktui.demo.engine "$@"')
    for old, new in [
        ('docker_image = "dsv41-4x-spark:mia-tp4"', f'docker_image = "{IMAGE}"'),
        ('entrypoint = ["python3", "-m", "sglang.launch_server"]',
         f"entrypoint = {json.dumps(['sh', '-c', script, 'seed-on-demo'])}"),
        ('min_free = "55G"', 'min_free = "64M"'),
        ("must_show = [\n", f'must_show = [\n    "{EXTRA}",\n'),
        *edits,
    ]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    text += tail
    folder.mkdir(parents=True)
    (folder / "recipe.toml").write_text(text)
    return folder


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("seed-state")


def seed_checkpoints(testbed: Any) -> None:
    """On every node, afresh, the checkpoint the seed's staging packs from."""
    for node in testbed.nodes:
        home = Path(node.home)
        shutil.rmtree(home / "hf", ignore_errors=True)
        shutil.rmtree(home / "kilork", ignore_errors=True)
        make_checkpoint(home / "hf", rows=(401, 403), cols=256, scale_cols=4)


@pytest.fixture(scope="module")
def recipe(testbed: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    seed_checkpoints(testbed)
    return seed_on_demo(tmp_path_factory.mktemp("recipes") / SLUG)


@pytest.fixture(scope="module")
def cli(testbed: Any, recipe: Path, state: Path) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, state_env(state), recipe)
    yield run
    run("down")


SEED_FUZZ = 31  # the seed of the key sequence (a failure prints it and the steps)
SEED_FUZZ_STEPS = 150


def named(text: str) -> bool:
    """Whether ``text`` names the EXTRA check: kind, ranks, pattern and where it failed."""
    flat = " ".join(text.split())  # a table may wrap it
    return (f"check failed: must_show (ranks any): {EXTRA} · never appeared on ranks 0, 1, 2, 3"
            in flat)


def test_up_wait_exits_3_and_names_the_check(cli: Cli) -> None:
    up = cli("up", "--wait")
    assert up.returncode == 3, up.stdout + up.stderr
    ready = re.search(r"ready: 4 ranks, (\d+)/(\d+) checks passed, 1 failed$", up.stdout, re.M)
    assert ready and int(ready[1]) == int(ready[2]) - 1, up.stdout
    assert named(up.stderr), up.stderr
    assert up.stderr.count("check failed") == 1, up.stderr
    # the fit check before launch: the test checkpoint's weights, a quarter a node (TP4), fit
    for node in range(4):
        assert re.search(rf"^node{node}: memory: needs about [\d.]+ KiB of [\d.]+ GiB free "
                         r"\(weights [\d.]+ KiB: 1 of 4 TP ranks; no GPU: --mem-fraction-static "
                         r"0\.8 has nothing to apply to", up.stderr, re.M), up.stderr


def test_status_names_the_check(cli: Cli) -> None:
    table = cli("status")
    assert table.returncode == 0, table.stderr
    assert named(table.stdout), table.stdout
    status = json.loads(cli("status", "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
    failed = [c for c in status["checks"] if c["state"] != "passed"]
    assert [(c["kind"], c["pattern"], c["ranks"], c["state"], c["failed_on"]) for c in failed] == [
        ("must_show", EXTRA, "any", "failed", [0, 1, 2, 3])]
    assert all(r["checks"]["failed"] == 1 and r["checks"]["pending"] == 0 for r in status["ranks"])


async def test_console_checks_panel_shows_it_failed(cli: Cli, testbed: Any, recipe: Path,
                                                    state: Path) -> None:
    options = ConsoleOptions([recipe.parent], Path(testbed.cluster_file),
                             state_root=state / "sparktui", recipe=SLUG, remember=False)
    app = SparkApp(options)
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 30, "the seed to open on the test cluster")
        assert main.session is not None and main.session.attached
        panel = main.checks_panel

        def extra_failed() -> bool:
            checks = panel.checks
            return checks is not None and any(
                c.pattern == EXTRA and checks.overall(c) == "failed" for c in checks.checks)

        await wait_for(pilot, extra_failed, 20, "the extra check to show failed")
        if not panel.display:
            await pilot.press("c")  # the checks panel, as the operator opens it
            await pilot.pause(0.2)
        assert panel.display
        checks = panel.checks
        assert checks is not None
        extra = next(c for c in checks.checks if c.pattern == EXTRA)
        assert [checks.overall(c) for c in checks.checks].count("failed") == 1
        assert [str(panel.get_cell(str(extra.id), f"r{r}")) for r in range(4)] == ["✗"] * 4
        assert str(panel.get_cell(str(extra.id), "all")) == "✗"
        await pilot.press("q")


async def test_console_reopens_the_seed_with_its_ranks_running(cli: Cli, testbed: Any, recipe: Path,
                                                                state: Path) -> None:
    """The crash an operator met: the seed open (attached, ranks running) and chosen again from
    the palette and from the recipe list. Nothing is remounted; the grep and the log view stay."""
    assert [r["state"] for r in json.loads(cli("status", "--json").stdout)["ranks"]] == ["ready"] * 4
    options = ConsoleOptions([recipe.parent], Path(testbed.cluster_file),
                             state_root=state / "sparktui", recipe=SLUG, remember=False,
                             cursor_blink=False)
    app = SparkApp(options)
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 30, "the seed to open on the test cluster")
        await wait_for(pilot, lambda: reopen.opened(main, SLUG), 30, "the seed attached")
        assert main.session is not None and main.session.attached
        await reopen.grep_then_rank(pilot, main, "rank", 2)
        before = reopen.view(main)
        staging_rows = list(main.staging.children)
        for _ in range(2):
            await reopen.palette_open(pilot, SLUG)
            assert reopen.view(main) == before
            await reopen.list_open(pilot, main, SLUG)
            assert reopen.view(main) == before
        assert app.screen is main and app._exception is None
        assert list(main.staging.children) == staging_rows  # not remounted
        assert all(main.state.has_container(r) for r in range(4))
    after = json.loads(cli("status", "--json").stdout)
    assert [r["state"] for r in after["ranks"]] == ["ready"] * 4  # the console left them running


async def test_console_fuzz_on_the_seed(cli: Cli, testbed: Any, recipe: Path, state: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The console fuzz with the seed on the test cluster (reopening it, downing, restarting and
    relaunching it over SSH among the keys): no exception escapes; ``x`` + ``y`` leaves no
    container on any node. Last in this module: it may take the seed down."""
    options = ConsoleOptions([recipe.parent], Path(testbed.cluster_file),
                             state_root=state / "sparktui", recipe=SLUG, remember=False,
                             cursor_blink=False)
    app = fuzz.FuzzApp.made(options, monkeypatch)
    async with app.run_test(size=(160, 48)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 30, "the seed to open on the test cluster")
        played = await fuzz.run(pilot, SEED_FUZZ, SEED_FUZZ_STEPS, [SLUG])
        await fuzz.take_down(pilot, busy_timeout=120)
        assert app._exception is None
    assert fuzz.keys_in(played) >= SEED_FUZZ_STEPS
    status = json.loads(cli("status", "--json").stdout)
    assert [r["container_id"] for r in status["ranks"]] == [None] * 4, status["ranks"]
    for node in testbed.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}", timeout=30)
        try:
            left = client.containers.list(all=True, filters={"label": f"{LABEL_RECIPE}={SLUG}"})
        finally:
            client.close()
        assert not left, (node.name, [c.name for c in left])
