"""Values that reach a node's shell are refused at validation when they hold a character a
shell gives a meaning to, with the key and the line; legitimate folders (spaces, accents) and
the local cluster (no shell) are left alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.core.cluster import load_cluster, load_cluster_text, local_cluster
from sparktui.core.errors import ClusterError
from sparktui.core.lints import lint
from sparktui.core.nodevalues import unsafe_char
from sparktui.core.recipe import load_recipe
from tests.conftest import CLUSTER4
from tests.shellwords import payloads

HOSTILE = [w for w in payloads("/tmp/marker") if not w.startswith("-")]
LEGITIMATE = ["/srv/My Models/caf\u00e9", "/mnt/nas/hf", "/data/run-1.2_x+y@host%20,a=b:c~d"]
DST = 'dst = "/home/kilork/mia-state/engram"'


def toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string (escapes included)


def node_value_problems(recipe: Path) -> list[tuple[str | None, int | None]]:
    return [(p.key, p.line) for p in lint(load_recipe(recipe), load_cluster(CLUSTER4))
            if p.code == "node-value"]


@pytest.mark.parametrize("word", HOSTILE)
def test_a_hostile_staging_dst_is_refused_with_its_line(word: str, write_recipe: Callable[..., Path]) -> None:
    path = write_recipe((DST, f"dst = {toml_string(word)}"))
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.startswith("dst = "))
    assert node_value_problems(path) == [("staging[0].dst", line)]


@pytest.mark.parametrize("word", HOSTILE[:6])
def test_a_hostile_model_src_or_nic_is_refused(word: str, write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('model = "deepseek-ai/DeepSeek-V4.1-Flash"', f"model = {toml_string(word)}"),
                        ('NCCL_SOCKET_IFNAME = "enp1s0f0np0"', f"NCCL_SOCKET_IFNAME = {toml_string(word)}"),
                        ('src = "{{hf}}/hub/', f'src = "{{{{hf}}}}/hub/{toml_string(word)[1:-1]}/'))
    keys = [k for k, _ in node_value_problems(path)]
    assert sorted(keys) == ["env.NCCL_SOCKET_IFNAME", "model", "staging[0].src"]
    problem = next(p for p in lint(load_recipe(path), load_cluster(CLUSTER4)) if p.key == "model")
    assert problem.severity == "error"
    assert "which sparktui never sends to a node" in problem.message
    assert f"{unsafe_char(word)!r}" in problem.message


@pytest.mark.parametrize("word", LEGITIMATE)
def test_legitimate_folders_pass(word: str, write_recipe: Callable[..., Path]) -> None:
    assert node_value_problems(write_recipe((DST, f"dst = {toml_string(word)}"))) == []


def test_the_local_cluster_runs_no_shell_and_takes_any_dst(write_recipe: Callable[..., Path]) -> None:
    recipe = load_recipe(write_recipe((DST, 'dst = "/tmp/o\'brien $x"')))
    assert [p for p in lint(recipe, local_cluster(4)) if p.code == "node-value"] == []


@pytest.mark.parametrize("word", HOSTILE[:8])
def test_a_hostile_hf_cache_or_socket_is_refused_with_its_line(word: str) -> None:
    text = (f"name = \"c\"\nhf_cache = {toml_string(word)}\n\n[[nodes]]\nname = \"a\"\nhost = \"h\"\n"
            f"[nodes.docker]\nsocket = {toml_string('/run/' + word)}\n")
    with pytest.raises(ClusterError) as info:
        load_cluster_text(text, Path("cluster.toml"))
    assert [(p.key, p.line) for p in info.value.problems] == [("hf_cache", 2), ("nodes[0].docker.socket", 8)]


def test_a_legitimate_hf_cache_with_spaces_passes() -> None:
    cluster = load_cluster_text('name = "c"\nhf_cache = "/srv/HF cache/\u00e9"\n\n[[nodes]]\nname = "a"\n'
                                'host = "h"\n')
    assert cluster.nodes[0].hf_cache == "/srv/HF cache/\u00e9"


def test_the_local_cluster_takes_any_hf_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "o'brien $HOME"))
    assert local_cluster(1).nodes[0].hf_cache.endswith("o'brien $HOME")
