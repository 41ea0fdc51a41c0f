"""The fit check on the real 4-node test cluster: node2's HF cache holds a snapshot whose
header declares more weights per rank than the machine has memory (written sparse), the other
nodes a small real one. ``doctor`` fails node2's memory fit alone; ``up`` refuses naming node2
alone, with its figures, read over SSH under each node's login shell, and no container starts
on any node. No boot: the refusal comes before anything starts."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import numpy as np
import pytest
from safetensors.numpy import save_file

from sparktui.core.plan import LABEL_RECIPE
from tests.conftest import RECIPES
from tests.runner import Cli, sparktui_cli, state_env
from tests.staging.ckpt import REVISION, sparse_checkpoint

pytestmark = pytest.mark.realparts

MODEL = "sparktui/fit-probe"
SLUG = "fit-probe"
FOLDER = f"models--{MODEL.replace('/', '--')}"


def mem_total() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))


@pytest.fixture
def snapshots(testbed: Any) -> Iterator[None]:
    """node2: 1 GiB more per TP rank than the machine's memory (the nodes share its kernel);
    the others: 64 KiB of real tensors."""
    for node in testbed.nodes:
        hf = Path(node.home) / "hf"
        shutil.rmtree(hf / "hub" / FOLDER, ignore_errors=True)
        if node.name == "node2":
            sparse_checkpoint(hf, MODEL, 4 * (mem_total() + 2**30))
        else:
            snap = hf / "hub" / FOLDER / "snapshots" / REVISION
            snap.mkdir(parents=True)
            save_file({"w": np.zeros((256, 256), np.uint8)}, str(snap / "model.safetensors"))
    yield
    for node in testbed.nodes:
        shutil.rmtree(Path(node.home) / "hf" / "hub" / FOLDER, ignore_errors=True)


@pytest.fixture
def cli(testbed: Any, tmp_path: Path, snapshots: None) -> Iterator[Cli]:
    folder = tmp_path / SLUG
    folder.mkdir()
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    (folder / "recipe.toml").write_text(text.replace('model = "sparktui/demo-model"',
                                                     f'model = "{MODEL}"'))
    run = sparktui_cli(testbed.cluster_file, state_env(tmp_path / "state"), folder)
    yield run
    run("down")


def containers(testbed: Any) -> list[str]:
    names = []
    for node in testbed.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}", timeout=30)
        try:
            names += [c.name for c in client.containers.list(
                all=True, filters={"label": f"{LABEL_RECIPE}={SLUG}"})]
        finally:
            client.close()
    return names


def test_up_refuses_the_node_whose_weights_cannot_fit_and_starts_nothing(
        testbed: Any, cli: Cli) -> None:
    doctor = cli("doctor", "--json")
    assert doctor.returncode == 1, doctor.stderr
    fits = {f["node"]: f for f in json.loads(doctor.stdout) if f["check"] == "memory fit"}
    assert {n: f["verdict"] for n, f in fits.items()} == {
        "node0": "passed", "node1": "passed", "node2": "failed", "node3": "passed"}
    assert fits["node0"]["sentence"].startswith("needs about 16.0 KiB of "), fits["node0"]
    assert fits["node2"]["sentence"].endswith("it does not fit"), fits["node2"]

    up = cli("up", "--wait")
    assert up.returncode == 1, up.stderr
    [said] = [ln for ln in up.stderr.splitlines() if ln.startswith("error: ")]
    assert re.match(r"error: node2: needs about [\d.]+ GiB of [\d.]+ [MG]iB free \(weights "
                    r"[\d.]+ GiB: 1 of 4 TP ranks; no GPU: --mem-fraction-static has nothing to "
                    r"apply to, the weights alone counted against MemAvailable\); nothing was "
                    r"started", said), said
    assert not re.search(r"node[013]", said), said
    for node in ("node0", "node1", "node3"):
        assert f"{node}: memory: needs about 16.0 KiB of " in up.stderr, up.stderr
    assert containers(testbed) == []
