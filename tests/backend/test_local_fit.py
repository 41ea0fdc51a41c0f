"""The fit check on the local cluster: this machine's HF cache holds a real safetensors file
(written sparse) whose header declares more bytes per rank than the machine has memory.
``doctor`` fails each node's memory fit with its figures, ``up`` refuses naming every node with
its figures and starts no rank process, ``up --no-memory-check`` starts anyway."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from safetensors import safe_open

from sparktui.backend.memfit import check_fit
from sparktui.backend.nodeshell import LocalShell, NodeShell
from sparktui.core.cluster import local_cluster
from sparktui.core.memfit import parse_header
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from sparktui.core.units import format_bytes
from tests.conftest import RECIPES
from tests.runner import Cli, local_cli
from tests.staging.ckpt import sparse_checkpoint

MODEL = "sparktui/fit-probe"
NODES = [f"local{i}" for i in range(4)]


def mem_total() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))


def rank_processes() -> list[str]:
    """This machine's processes running the demo engine on this test's model."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"sparktui.demo.engine" in cmdline and MODEL.encode() in cmdline:
            found.append(proc.name)
    return found


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    """The demo TP4 recipe, its model the one in the cache."""
    folder = tmp_path / "fit-probe"
    folder.mkdir()
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    assert text.count('model = "sparktui/demo-model"') == 1
    (folder / "recipe.toml").write_text(text.replace('model = "sparktui/demo-model"',
                                                     f'model = "{MODEL}"'))
    return folder


@pytest.fixture
def cli(tmp_path: Path, recipe: Path) -> Iterator[Cli]:
    yield from local_cli(tmp_path, recipe)


def test_weights_beyond_memory_refuse_doctor_and_up_and_nothing_starts(
        cli: Cli, recipe: Path, tmp_path: Path) -> None:
    per_rank = mem_total() + 2**30  # each of the 4 TP ranks: more than the whole machine
    weights = sparse_checkpoint(tmp_path / "hf", MODEL, 4 * per_rank)
    with safe_open(str(weights), "np") as f:  # a real file, not just bytes that look like one
        assert f.get_slice("model.embed_tokens.weight").get_shape()[0] * 2**20 >= 4 * per_rank
    with open(weights, "rb") as f:
        raw = f.read(4096)
    header = parse_header(raw[8:8 + int.from_bytes(raw[:8], "little")])
    need = format_bytes(-(-header.sharded // 4) + header.replicated)

    doctor = cli("doctor", str(recipe), "--json")
    assert doctor.returncode == 1, doctor.stderr
    fits = [f for f in json.loads(doctor.stdout) if f["check"] == "memory fit"]
    assert [f["node"] for f in fits] == NODES and {f["verdict"] for f in fits} == {"failed"}
    for f in fits:
        assert re.fullmatch(rf"needs about {re.escape(need)} of [\d.]+ [KMG]iB free \(weights "
                            rf"{re.escape(need)}: 1 of 4 TP ranks; no GPU: --mem-fraction-static "
                            r"has nothing to apply to, the weights alone counted against "
                            r"MemAvailable\): it does not fit", f["sentence"]), f["sentence"]

    up = cli("up", str(recipe), "--wait")
    assert up.returncode == 1, up.stderr
    [said] = [ln for ln in up.stderr.splitlines() if ln.startswith("error: ")]
    for node in NODES:
        assert re.search(rf"{node}: needs about {re.escape(need)} of [\d.]+ [KMG]iB free \(", said), said
    assert said.endswith("nothing was started (free memory there, or give each node less to "
                         "hold; up --no-memory-check starts anyway)"), said
    status = json.loads(cli("status", str(recipe), "--json").stdout)
    assert [r["container_id"] for r in status["ranks"]] == [None] * 4
    assert rank_processes() == []

    forced = cli("up", str(recipe), "--no-memory-check", "--wait")
    assert forced.returncode == 0, forced.stderr  # the demo engine loads no weights
    assert "ready: 4 ranks" in forced.stdout and "needs about" not in forced.stderr
    status = json.loads(cli("status", str(recipe), "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
    assert len(rank_processes()) >= 4


def test_a_snapshot_that_fits_is_said_and_starts(cli: Cli, recipe: Path, tmp_path: Path) -> None:
    sparse_checkpoint(tmp_path / "hf", MODEL, 4 * 2**20)  # 1 MiB a rank
    up = cli("up", str(recipe))
    assert up.returncode == 0, up.stderr
    for node in NODES:
        assert re.search(rf"^{node}: memory: needs about 1\.0 MiB of [\d.]+ GiB free \(weights "
                         r"1\.0 MiB: 1 of 4 TP ranks; no GPU", up.stderr, re.M), up.stderr


def test_no_snapshot_is_said_and_does_not_refuse(cli: Cli, recipe: Path, tmp_path: Path) -> None:
    up = cli("up", str(recipe))
    assert up.returncode == 0, up.stderr
    hub = tmp_path / "hf" / "hub" / "models--sparktui--fit-probe" / "snapshots"
    # one notice for the nodes that cannot tell alike
    assert (f"{', '.join(NODES)}: memory: cannot tell whether it fits: no snapshot found ({hub}: "
            "No such file or directory); the engine may download the model") in up.stderr, up.stderr


async def test_a_listing_that_cannot_run_or_a_broken_header_is_said(recipe: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch
                                                                    ) -> None:
    """Through this machine's shell: no Python to list with, then a file whose header is no
    JSON: the node cannot tell, and says why."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    weights = sparse_checkpoint(tmp_path / "hf", MODEL, 2**20)
    cluster = local_cluster(4)
    loaded = load_recipe(recipe / "recipe.toml")
    plan = build_plan(loaded, cluster)
    nodes = list(cluster.nodes)
    shells: dict[str, NodeShell] = {n.name: LocalShell(n) for n in nodes}
    [fit, *_] = await check_fit(loaded, plan, nodes, shells, python=str(tmp_path / "no-python"))
    assert fit.said() == (f"local0: memory: cannot tell whether it fits: its weights could not be "
                          f"listed: {tmp_path / 'no-python'}: No such file or directory")
    (weights.parent / "broken.safetensors").write_bytes((5).to_bytes(8, "little") + b"{nope")
    fits = await check_fit(loaded, plan, nodes, shells, python=sys.executable)
    assert {f.why for f in fits} == {"a header unreadable: broken.safetensors: its header is no "
                                     "JSON (Expecting property name enclosed in double quotes: "
                                     "line 1 column 2 (char 1))"}
