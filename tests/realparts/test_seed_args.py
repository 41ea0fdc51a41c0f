"""Did every flag take effect, on the real 4-node test cluster: the seed with the demo engine as
its stand-in (as tests/realparts/test_seed_checks.py runs it), which prints SGLang's
``server_args=ServerArgs(...)`` for its command line. Told to clamp ``--max-running-requests``
to 13 on rank 2 and given a flag no SGLang knows (which it ignores: not in its dump), ``up
--wait`` exits 3 naming both with ranks and values, and ``status --json`` holds each flag's
verdict per rank; the unmodified seed exits 0 with every flag taken.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.realparts.test_seed_checks import seed_checkpoints, seed_on_demo
from tests.runner import Cli, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

SLUG = "seed-args"  # its own containers: test_seed_checks' seed may be up meanwhile
# its own ports too: another test's group may hold 30000 and the cluster's rendezvous port
PORT, DIST_PORT = 30400, 25400
CLAMP = 'SPARKTUI_DEMO_CLAMP = "max_running_requests=13@2"\n'
UNKNOWN = "--enable-foo"


def write_seed(folder: Path, *, clamped: bool) -> Path:
    """The seed on the demo engine (its EXTRA line dropped again), clamped and with the
    unknown flag, or as the operator wrote it."""
    shutil.rmtree(folder, ignore_errors=True)
    seed_on_demo(folder)
    path = folder / "recipe.toml"
    text = path.read_text()
    extra = next(line for line in text.splitlines(keepends=True) if "a feature no image arms" in line)
    text = text.replace(extra, "", 1)
    assert text.count("\nport = 30000\n") == 1
    text = text.replace("\nport = 30000\n", f"\nport = {PORT}\n", 1)
    if clamped:
        for old, new in (("[env]\n", "[env]\n" + CLAMP),
                         ('"--watchdog-timeout", "1800",', f'"--watchdog-timeout", "1800", "{UNKNOWN}",')):
            assert text.count(old) == 1, old
            text = text.replace(old, new)
    path.write_text(text)
    return folder


@pytest.fixture(scope="module")
def folder(testbed: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    seed_checkpoints(testbed)
    return tmp_path_factory.mktemp("recipes") / SLUG


@pytest.fixture(scope="module")
def cli(testbed: Any, folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    write_seed(folder, clamped=True)
    cluster = tmp_path_factory.mktemp("cluster") / "cluster.toml"
    text = Path(testbed.cluster_file).read_text()
    assert text.count("dist_init_port = ") == 1
    cluster.write_text(re.sub(r"dist_init_port = \d+", f"dist_init_port = {DIST_PORT}", text))
    run = sparktui_cli(str(cluster), state_env(tmp_path_factory.mktemp("state")), folder)
    yield run
    run("down")


def args_of(status: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each rank's args verdicts from ``status --json``."""
    out = {}
    for check in status["checks"]:
        if check["kind"] == "args":
            for r in check["per_rank"]:
                out[r["rank"]] = {**r["args"], "state": r["state"]}
    return out


def test_a_clamped_and_an_unknown_flag_exit_3_named_with_ranks_and_values(cli: Cli) -> None:
    up = cli("up", "--wait")
    assert up.returncode == 3, up.stdout + up.stderr
    err = " ".join(up.stderr.split())
    flags = re.search(r"args on rank 0: args \d+/(\d+) took effect", err)
    assert flags, err
    n = int(flags[1])  # the seed's flags, the launcher's and --enable-foo (30; 31 with --tp-size)
    assert (f"check failed: args on rank 2: args {n - 2}/{n} took effect, 1 differs: "
            "max_running_requests 16 -> 13, 1 unknown: --enable-foo") in err, err
    for rank in (0, 1, 3):
        assert (f"check failed: args on rank {rank}: args {n - 1}/{n} took effect, "
                "1 unknown: --enable-foo") in err, err
    assert err.count("check failed: args on rank") == 4, err

    status = json.loads(cli("status", "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
    verdicts = args_of(status)
    assert sorted(verdicts) == [0, 1, 2, 3]
    for rank, report in verdicts.items():
        assert report["state"] == "failed" and report["reported"] and report["table"] == "0.5.23"
        by = {f["flag"]: f for f in report["flags"]}
        assert by[UNKNOWN]["verdict"] == "unknown"
        mrr = by["--max-running-requests"]
        want = ("differs", "16", "13") if rank == 2 else ("took effect", "16", "16")
        assert (mrr["verdict"], mrr["given"], mrr["reported"]) == want, (rank, mrr)
        others = [f for f in report["flags"] if f["flag"] not in (UNKNOWN, "--max-running-requests")]
        assert others and all(f["verdict"] == "took effect" for f in others), others
    table = cli("status")
    assert "rank 2 args" in table.stdout and "max_running_requests 16 -> 13" in table.stdout


def test_the_unmodified_seed_exits_0_with_every_flag_taken(cli: Cli, folder: Path) -> None:
    assert cli("down").returncode == 0
    write_seed(folder, clamped=False)
    up = cli("up", "--wait")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "check failed" not in up.stderr
    verdicts = args_of(json.loads(cli("status", "--json").stdout))
    assert sorted(verdicts) == [0, 1, 2, 3]
    for report in verdicts.values():
        assert report["state"] == "passed"
        assert report["flags"] and all(f["verdict"] == "took effect" for f in report["flags"])
