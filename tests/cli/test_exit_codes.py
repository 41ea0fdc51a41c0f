"""Exit codes that say what happened, on the local cluster with real demo ranks: 0 ready and
every check passed, 3 ready but a check failed (named, with the ranks where it failed), 1 a
rank failed or the boot timed out, 2 a recipe or cluster that cannot be used (validate keeps
its documented 1)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.runner import Cli, local_env, sparktui_run

DEMO = ROOT / "recipes" / "demo-tp4" / "recipe.toml"
NEVER = "DEMO never printed: [feature] armed ..."


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    sparktui = sparktui_run(local_env(tmp_path))
    launched: list[str] = []

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        if args[0] == "up":
            launched.append(args[1])
        return sparktui(*args, timeout=timeout)

    yield run
    for recipe in launched:
        run("down", recipe)


def variant(tmp_path: Path, name: str, *, boot: str = "", replace: tuple[str, str] = ("", "")) -> str:
    """The demo recipe in a folder of its own, ``boot`` added to its [boot] table."""
    text = DEMO.read_text().replace(*replace).replace("[boot]\n", f"[boot]\n{boot}")
    folder = tmp_path / name
    folder.mkdir()
    (folder / "recipe.toml").write_text(text)
    return str(folder)


def test_a_check_that_failed_exits_3_and_is_named(cli: Cli, tmp_path: Path) -> None:
    recipe = variant(tmp_path, "demo-checks", replace=(
        '    "Load weight end. ...",\n',
        f'    "Load weight end. ...",\n    {{ pattern = "{NEVER}", ranks = [1, 2] }},\n'))
    up = cli("up", recipe, "--wait")
    assert up.returncode == 3, up.stdout + up.stderr
    assert "ready: 4 ranks, 15/16 checks passed, 1 failed" in up.stdout  # 12 and an args check a rank
    assert (f"check failed: must_show (ranks 1,2): {NEVER} · never appeared on ranks 1, 2"
            in up.stderr), up.stderr  # the pattern verbatim: its [feature] is no markup

    status = json.loads(cli("status", recipe, "--json").stdout)
    failed = [c for c in status["checks"] if c["state"] == "failed"]
    assert [(c["kind"], c["pattern"], c["ranks"], c["failed_on"]) for c in failed] == [
        ("must_show", NEVER, [1, 2], [1, 2])]
    assert [r["checks"]["failed"] for r in status["ranks"]] == [0, 1, 1, 0]
    assert all(r["checks"]["pending"] == 0 for r in status["ranks"])
    passed = next(c for c in status["checks"] if c["kind"] == "ready")
    assert passed["state"] == "passed" and "fired up" in passed["per_rank"][0]["text"]
    table = cli("status", recipe)
    assert table.returncode == 0
    assert "boot checks: 15/16 checks passed, 1 failed" in table.stdout
    assert f"check failed: must_show (ranks 1,2): {NEVER}" in " ".join(table.stdout.split())

    again = cli("restart", recipe, "--group", "--wait")
    assert again.returncode == 3, again.stdout + again.stderr
    assert f"check failed: must_show (ranks 1,2): {NEVER}" in again.stderr


def test_a_boot_that_times_out_exits_1(cli: Cli, tmp_path: Path) -> None:
    recipe = variant(tmp_path, "demo-stall", replace=('timeout = "2m"', 'timeout = "3s"\n'
                                                      '# stalls: never ready'))
    text = Path(recipe, "recipe.toml").read_text()
    Path(recipe, "recipe.toml").write_text(text.replace('SPARKTUI_DEMO_TICK = "1"',
                                                        'SPARKTUI_DEMO_TICK = "1"\nSPARKTUI_DEMO_STALL = "1"'))
    up = cli("up", recipe, "--wait")
    assert up.returncode == 1, up.stdout + up.stderr
    assert "boot timed out after 3 s" in up.stderr
    # the boot is over: every line that never showed has failed, and is named
    assert "check failed: ready (ranks 0): The server is fired up and ready to roll!" in up.stderr


def test_unusable_recipe_or_cluster_exits_2_validate_keeps_1(cli: Cli, tmp_path: Path) -> None:
    bad = variant(tmp_path, "bad", replace=("port = 30000", 'port = "30000"'))
    for verb in (["up", bad, "--wait"], ["restart", bad, "--group", "--wait"], ["status", bad],
                 ["plan", bad]):
        res = cli(*verb)
        assert res.returncode == 2, (verb, res.stderr)
        assert "recipe.toml:" in res.stderr and "port" in res.stderr
    assert cli("validate", bad).returncode == 1
    cluster = tmp_path / "cluster.toml"
    cluster.write_text('name = "x"\n[[nodes]]\nname = "a"\nhots = "a.lan"\n')
    res = cli("up", str(DEMO.parent), "--cluster", str(cluster), "--wait")
    assert res.returncode == 2 and "cluster.toml:" in res.stderr, res.stderr
    assert cli("status", "no-such-recipe").returncode == 2
    res = cli("restart", str(DEMO.parent), "--rank", "9", "--wait")
    assert res.returncode == 2 and "rank 9 does not exist (0-3)" in res.stderr, res.stderr
