"""Each lint, on a variant of the operator's recipe."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from sparktui.core.cluster import load_cluster, local_cluster
from sparktui.core.errors import RecipeError
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


def test_tp_size_flag_is_the_launchers(write_recipe: Callable[..., Path]) -> None:
    """The launcher appends --tp-size from tensor_parallel_size: args cannot set it at all."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(('"--trust-remote-code",', '"--trust-remote-code", "--tp-size", "8",')))
    assert codes(caught.value.problems) == [("launcher-flag", "error", "args[3]")]


def seed_with(write_recipe: Callable[..., Path], *tokens: str, top: str = "") -> Path:
    """The seed with ``tokens`` added to args on a line of their own (and ``top`` keys)."""
    added = "".join(f'"{t}", ' for t in tokens)
    return write_recipe(('    "--watchdog-timeout", "1800",\n',
                         f'    "--watchdog-timeout", "1800",\n    {added}\n'),
                        ("tensor_parallel_size = 4\n", f"tensor_parallel_size = 4\n{top}"))


def added_line(path: Path, token: str) -> int:
    return max(n for n, t in enumerate(path.read_text().splitlines(), 1) if f'"{token}"' in t)


def test_a_flag_unknown_to_the_engine_version_is_a_warning_naming_it(
        write_recipe: Callable[..., Path]) -> None:
    path = seed_with(write_recipe, "--enable-foo")
    (p,) = lint(load_recipe(path))
    assert (p.code, p.severity, p.line) == ("engine-flag", "warning", added_line(path, "--enable-foo"))
    assert p.message.startswith("--enable-foo is not a flag of SGLang 0.5.23 (checked against its "
                                "own parser's table; the newest shipped, as the recipe sets no "
                                "engine_flags)")
    path = seed_with(write_recipe, "--enable-foo", top='engine_flags = "0.5.23"\n')
    (p,) = lint(load_recipe(path))
    assert "not a flag of SGLang 0.5.23 (checked against its own parser's table)" in p.message
    path = seed_with(write_recipe, "--enable-foo", top='engine_flags = "none"\n')
    assert lint(load_recipe(path)) == []  # a fork's image: its flags are its own


def test_an_unknown_flag_is_told_the_nearest_flag_a_few_times_a_recipe(
        write_recipe: Callable[..., Path]) -> None:
    """difflib over the table's options is slow: the first three unknown flags get a hint."""
    typos = ("--max-runing-requests", "--mem-fraction-statc", "--context-lenght", "--watchdog-timout")
    found = [p for p in lint(load_recipe(seed_with(write_recipe, *typos)))
             if p.code == "engine-flag"]
    assert [p.message.split(" ", 1)[0] for p in found] == list(typos)
    assert found[0].message.endswith("; did you mean --max-running-requests?")
    assert found[1].message.endswith("; did you mean --mem-fraction-static?")
    assert found[2].message.endswith("; did you mean --context-length?")
    assert "did you mean" not in found[3].message


@pytest.mark.parametrize(("tokens", "message"), [
    (("--max-running-requests", "sixteen"),
     "--max-running-requests sixteen: SGLang 0.5.23 takes an integer"),
    (("--max-running-requests=sixteen",),
     "--max-running-requests sixteen: SGLang 0.5.23 takes an integer"),
    (("--mem-fraction-static", "most"), "--mem-fraction-static most: SGLang 0.5.23 takes a number"),
    (("--attention-backend", "nope"), "--attention-backend nope: SGLang 0.5.23 takes one of triton,"),
    (("--trust-remote-code=yes",), "--trust-remote-code is a switch in SGLang 0.5.23"),
    (("--m", "1"), "--m is ambiguous for SGLang 0.5.23's parser: it abbreviates --mamba-backend,"),
])
def test_a_value_the_engines_parser_refuses_is_an_error_at_its_line(
        write_recipe: Callable[..., Path], tokens: tuple[str, ...], message: str) -> None:
    path = seed_with(write_recipe, *tokens)
    found = [p for p in lint(load_recipe(path)) if p.code == "engine-flag"]
    assert [(p.severity, p.line) for p in found] == [("error", added_line(path, tokens[0]))]
    assert found[0].message.startswith(message)


@pytest.mark.parametrize("tokens", [
    ("--max-running-requests", "{{nnodes}}"),  # filled per rank: its rank's line tells
    ("--enable-lora", "--lora-paths", "a", "b", "c", "--disable-radix-cache"),  # nargs "+"
    ("--context-length", "1048576", "--random-seed", "-1"),  # a negative number is a value
])
def test_values_the_parser_takes_are_clean(write_recipe: Callable[..., Path],
                                           tokens: tuple[str, ...]) -> None:
    found = [p for p in lint(load_recipe(seed_with(write_recipe, *tokens)))
             if p.code == "engine-flag"]
    assert found == []


def test_args_to_a_wrapper_are_not_the_engines(write_recipe: Callable[..., Path]) -> None:
    """``sh -c`` gets args the table cannot speak for: they are not checked."""
    path = write_recipe(('entrypoint = ["python3", "-m", "sglang.launch_server"]',
                         'entrypoint = ["sh", "-c", "exec python3 /boot.py \\"$@\\"", "boot"]'))
    path.write_text(path.read_text().replace('    "--watchdog-timeout", "1800",\n',
                                             '    "--watchdog-timeout", "1800", "--enable-foo",\n'))
    assert [p for p in lint(load_recipe(path)) if p.code == "engine-flag"] == []


def test_an_unshipped_engine_version_is_refused_with_the_shipped_ones(
        write_recipe: Callable[..., Path]) -> None:
    with pytest.raises(RecipeError) as caught:
        load_recipe(seed_with(write_recipe, top='engine_flags = "0.5.32"\n'))
    (p,) = caught.value.problems
    assert p.code == "engine-flags" and p.key == "engine_flags"
    assert "no flag table of SGLang 0.5.32 ships with sparktui; did you mean '0.5.23'?" in p.message


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
