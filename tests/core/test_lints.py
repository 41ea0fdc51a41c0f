"""Each lint, on a variant of the operator's recipe."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from sparktui.core.cluster import load_cluster, local_cluster
from sparktui.core.lints import lint
from sparktui.core.problems import Problem
from sparktui.core.recipe import load_recipe
from tests.conftest import CLUSTER4, SEED


def codes(problems: list[Problem]) -> list[tuple[str, str, str | None]]:
    return [(p.code, p.severity, p.key) for p in problems]


def test_seed_is_clean_on_both_clusters() -> None:
    recipe = load_recipe(SEED)
    assert lint(recipe, load_cluster(CLUSTER4)) == []
    assert lint(recipe, local_cluster(4)) == []


def test_tp_size_env(write_recipe: Callable[..., Path]) -> None:
    r = load_recipe(write_recipe(('TP_SIZE = "4"', 'TP_SIZE = "2"')))
    assert codes(lint(r)) == [("tp-size", "error", "env.TP_SIZE")]


def test_tp_size_flag(write_recipe: Callable[..., Path]) -> None:
    r = load_recipe(write_recipe(('"--trust-remote-code",', '"--trust-remote-code", "--tp-size", "8",')))
    assert codes(lint(r)) == [("tp-size", "error", "args[3]")]


def test_ep_size(write_recipe: Callable[..., Path]) -> None:
    r = load_recipe(write_recipe(('"--ep-size", "1"', '"--ep-size", "4"')))
    problems = lint(r)
    assert codes(problems) == [("ep-size", "error", "env.EP_SIZE")]
    assert "EP_SIZE='1' disagrees with --ep-size 4" in problems[0].message


def test_cuda_graph_below_running_requests(write_recipe: Callable[..., Path]) -> None:
    r = load_recipe(write_recipe(('"--cuda-graph-max-bs-decode", "16"',
                                  '"--cuda-graph-max-bs-decode", "8"')))
    problems = lint(r)
    at = r.spec.args.index("--cuda-graph-max-bs-decode")
    assert codes(problems) == [("cuda-graph-bs", "warning", f"args[{at}]")]
    assert "below --max-running-requests 16" in problems[0].message
    assert "above 8" in problems[0].message


def test_duplicate_flag(write_recipe: Callable[..., Path]) -> None:
    r = load_recipe(write_recipe(('"--random-seed", "0",', '"--random-seed", "0", "--random-seed", "1",')))
    problems = lint(r)
    first = r.spec.args.index("--random-seed")
    assert codes(problems) == [("duplicate-flag", "warning", f"args[{first + 2}]")]
    assert f"first at args[{first}]" in problems[0].message
    assert problems[0].line == SEED.read_text().splitlines().index(
        '    "--random-seed", "0",') + 1


def test_packed_dir_not_where_staging_writes(write_recipe: Callable[..., Path]) -> None:
    r = load_recipe(write_recipe(('DSV41_PACKED_DIR = "/state/engram"',
                                  'DSV41_PACKED_DIR = "/state/engram-old"')))
    problems = lint(r)
    assert codes(problems) == [("staged-path", "warning", "env.DSV41_PACKED_DIR")]
    assert "/home/kilork/mia-state/engram-old on the host" in problems[0].message
    assert "staging writes to /home/kilork/mia-state/engram" in problems[0].message


def test_staging_dst_invisible_in_container(write_recipe: Callable[..., Path]) -> None:
    r = load_recipe(write_recipe(('dst = "/home/kilork/mia-state/engram"', 'dst = "/nvme/engram"')))
    found = codes(lint(r))
    assert ("staged-path", "warning", "staging[0].dst") in found
    assert ("staged-path", "warning", "env.DSV41_PACKED_DIR") in found


def test_cluster_too_small() -> None:
    problems = lint(load_recipe(SEED), local_cluster(2))
    assert codes(problems) == [("cluster-size", "error", "required_nodes")]


@pytest.fixture
def local_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny HF snapshot with engram tensors, readable from this machine (the local cluster)."""
    hf = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(hf))
    snap = hf / "hub/models--deepseek-ai--DeepSeek-V4.1-Flash/snapshots" \
        "/dba1be0a40aa45a94ad051997016db3960a90277"
    snap.mkdir(parents=True)
    save_file({
        "model.layers.1.engram.weight": np.ones((1001, 64), dtype=np.uint8),   # 64064 B
        "model.layers.1.engram.scale": np.ones((1001, 2), dtype=np.float32),   # 8008 B
        "model.layers.1.mlp.weight": np.ones((10, 10), dtype=np.float32),
    }, str(snap / "model-00001-of-00001.safetensors"))
    return snap


def test_min_free_below_bytes_written(local_snapshot: Path, write_recipe: Callable[..., Path]) -> None:
    r = load_recipe(write_recipe(('min_free = "55G"', 'min_free = "10k"')))
    problems = lint(r, local_cluster(4))
    assert codes(problems) == [("min-free", "warning", "staging[0].min_free")]
    assert "below the 70.4 KiB this job writes per node" in problems[0].message


def test_min_free_enough(local_snapshot: Path) -> None:
    assert lint(load_recipe(SEED), local_cluster(4)) == []
