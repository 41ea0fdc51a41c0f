"""The fit check's core: safetensors headers read for their bytes (files the safetensors library
wrote, and any bytes at all: only ``WeightsUnreadable``), the snapshot listing run on this
machine, the engines' memory fraction flags, and the verdict on unified, discrete and GPU-less
nodes (the GB10 and H200 fixtures: real nvidia-smi output)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from sparktui.core.engines import engine
from sparktui.core.memfit import (
    HEADER_CAP,
    Fraction,
    NodeFit,
    Snapshot,
    WeightsUnreadable,
    WontFit,
    fraction_default,
    judge,
    listing_argv,
    memory_fraction,
    parse_header,
    parse_listing,
    repo_folder,
)
from sparktui.core.meminfo import NodeMemory
from sparktui.core.telemetry import NodeSample, parse_gpus
from tests.staging.ckpt import REPO, make_checkpoint

FIX = Path(__file__).resolve().parent.parent / "data" / "fixtures"
GiB = 2**30


def header_of(path: Path) -> bytes:
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return raw[8:8 + n]


def test_a_header_written_by_safetensors_splits_matrices_from_vectors(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    save_file({"w": np.zeros((8, 16), np.float16), "norm": np.zeros(16, np.float32),
               "scalar": np.zeros((), np.float32)}, str(path), metadata={"format": "pt"})
    weights = parse_header(header_of(path), path.stat().st_size, "m.safetensors")
    assert (weights.sharded, weights.replicated, weights.tensors) == (8 * 16 * 2, 16 * 4 + 4, 3)
    with pytest.raises(WeightsUnreadable, match="past the file's"):
        parse_header(header_of(path), path.stat().st_size - 1)  # an incomplete download


def test_the_listing_reads_a_real_hf_cache_on_this_machine(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "hf")
    folder = repo_folder(str(tmp_path / "hf"), REPO)
    assert folder is not None
    out = subprocess.run(listing_argv(folder, sys.executable), capture_output=True, text=True,
                         timeout=30, check=True).stdout
    snap = parse_listing(out)
    assert snap.folder == str(ckpt.snapshot)
    assert [f.name for f in snap.files] == ckpt.shard_names
    assert snap.total == sum(a.nbytes for a in ckpt.tensors.values())
    # every tensor of the test checkpoint has two dimensions: a quarter each under TP4
    assert snap.rank_bytes(4) == -(-snap.total // 4)


def test_refs_main_names_the_snapshot_else_the_only_one(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "hf")
    repo = ckpt.snapshot.parent.parent
    other = ckpt.snapshot.parent / ("0" * 40)
    other.mkdir()

    def listed() -> Snapshot:
        return parse_listing(subprocess.run(listing_argv(str(repo), sys.executable),
                                            capture_output=True, text=True, check=True).stdout)

    two = listed()
    assert two.folder is None and "2 snapshots and no refs/main" in two.missing
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(ckpt.snapshot.name + "\n")
    assert listed().folder == str(ckpt.snapshot)
    (repo / "refs" / "main").write_text("0" * 40)
    assert listed().folder == str(other) and listed().files == ()
    gone = parse_listing(subprocess.run(listing_argv(str(tmp_path / "none"), sys.executable),
                                        capture_output=True, text=True, check=True).stdout)
    assert gone.folder is None and "No such file or directory" in gone.missing


def test_a_header_past_the_cap_is_refused_unread(tmp_path: Path) -> None:
    snap = tmp_path / "hub" / "models--a--b" / "snapshots" / "r"
    snap.mkdir(parents=True)
    with open(snap / "big.safetensors", "wb") as f:
        f.write((HEADER_CAP + 1).to_bytes(8, "little"))
        f.truncate(HEADER_CAP + 64)  # sparse: the listing must not read it
    (snap / "short.safetensors").write_bytes(b"\x01\x02")
    out = subprocess.run(listing_argv(str(snap.parent.parent), sys.executable),
                         capture_output=True, text=True, check=True).stdout
    assert len(out) < 1000
    with pytest.raises(WeightsUnreadable, match=r"big.safetensors: a header of \d+ bytes, more than"):
        parse_listing(out)
    (snap / "big.safetensors").unlink()
    with pytest.raises(WeightsUnreadable, match=r"short\.safetensors: shorter than a safetensors header"):
        parse_listing(subprocess.run(listing_argv(str(snap.parent.parent), sys.executable),
                                     capture_output=True, text=True, check=True).stdout)


def test_repo_folder_takes_repo_ids_only() -> None:
    assert repo_folder("/home/hf", "deepseek-ai/DeepSeek-V4.1-Flash") == \
        "/home/hf/hub/models--deepseek-ai--DeepSeek-V4.1-Flash"
    assert repo_folder("/home/hf/", "gpt2") == "/home/hf/hub/models--gpt2"
    for path in ("/models/x", "../x", "a/../../b", "a/b/c", ""):
        assert repo_folder("/home/hf", path) is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_are_a_header_or_unreadable(data: bytes) -> None:
    try:
        weights = parse_header(data, 10_000)
    except WeightsUnreadable as exc:
        assert str(exc)
        return
    assert 8 + len(data) + weights.sharded + weights.replicated <= 10_000 or weights.tensors > 1


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
TENSOR = st.fixed_dictionaries({"dtype": st.sampled_from(["F16", "BF16", "U8"]) | JSON,
                                "shape": st.lists(st.integers(-2, 2**40), max_size=3) | JSON,
                                "data_offsets": st.lists(st.integers(-5, 2**70), max_size=3) | JSON})


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=10), TENSOR | JSON, max_size=5) | JSON,
       st.none() | st.integers(0, 2**66))
def test_any_json_is_a_header_or_unreadable(header: object, size: int | None) -> None:
    try:
        weights = parse_header(json.dumps(header).encode(), size)
    except WeightsUnreadable:
        return
    assert weights.sharded >= 0 and weights.replicated >= 0


LINE = st.fixed_dictionaries({}, optional={
    "file": JSON, "size": st.integers(-1, 2**70) | JSON, "length": st.integers(-1, 600) | JSON,
    "header": st.binary(max_size=60).map(lambda b: base64.b64encode(b).decode()) | JSON,
    "error": JSON, "snapshot": JSON, "missing": JSON})


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE.map(json.dumps) | st.text(max_size=30), max_size=5))
def test_any_listing_is_read_or_unreadable(lines: list[str]) -> None:
    try:
        snap = parse_listing("\n".join(lines))
    except WeightsUnreadable as exc:
        assert str(exc)
        return
    assert snap.folder is not None or not snap.files  # no snapshot lists no file
    assert all(f.sharded >= 0 and f.replicated >= 0 for f in snap.files)


def test_deep_json_is_unreadable_not_a_recursion_error() -> None:
    with pytest.raises(WeightsUnreadable):
        parse_header(b"[" * 100_000)
    with pytest.raises(WeightsUnreadable):
        parse_listing("[" * 100_000)


@pytest.mark.parametrize(("engine_name", "command", "value", "given"), [
    ("sglang", ["--mem-fraction-static", "0.80"], 0.8, True),
    ("sglang", ["--mem-fraction-static=0.5", "--x"], 0.5, True),
    ("sglang", ["--mem-fraction-static", "0.5", "--mem-fraction-static", "0.6"], 0.6, True),
    ("sglang", ["--mem_fraction_static", "0.5"], None, False),  # SGLang's parser has no "_" form
    ("vllm", ["--gpu-memory-utilization", "0.7"], 0.7, True),
    ("vllm", ["--gpu_memory_utilization=0.75"], 0.75, True),
    ("vllm", ["--device-memory-utilization", "0.6"], 0.6, True),
    ("vllm", ["--max-model-len", "4096"], 0.92, False),  # vLLM 0.33.0's parser default
])
def test_the_memory_fraction_flag_of_each_engine(engine_name: str, command: list[str],
                                                 value: float | None, given: bool) -> None:
    rule = engine(engine_name).memory_fraction
    default = fraction_default(engine_name, rule.dest, None)
    got = memory_fraction(engine_name, rule, command, default)
    assert (got.value, got.given) == (value, given)
    if value is None:
        assert got.note == "--mem-fraction-static not set: the engine picks its share at start"


def test_a_fraction_that_is_no_share_is_said() -> None:
    rule = engine("sglang").memory_fraction
    for text in ("1.5", "0", "abc", "nan"):
        got = memory_fraction("sglang", rule, ["--mem-fraction-static", text], None)
        assert got.value is None and "is no share between 0 and 1" in got.note
    assert memory_fraction("sglang", rule, ["--mem-fraction-static"], None).value is None


def snapshot(rank_gib: float, tp: int = 4) -> Snapshot:
    """A snapshot whose matrices give each of ``tp`` ranks ``rank_gib`` GiB, plus 1 MiB of norms."""
    from sparktui.core.memfit import FileWeights
    return Snapshot("/hf/snap", (FileWeights("model.safetensors", int(rank_gib * GiB) * tp,
                                             2**20, 10),))


def gb10() -> tuple[NodeMemory, NodeSample]:
    gpus, note = parse_gpus((FIX / "nvidia-smi-gb10/query.csv").read_text())
    memory = NodeMemory(127600748 * 1024, 118566368 * 1024)  # its meminfo excerpt
    return memory, NodeSample(memory.total, memory.available, True, 0.0, (0, 0), gpus, [], note)


def test_gb10_counts_the_fraction_of_memtotal_against_memavailable() -> None:
    memory, sample = gb10()
    fraction = Fraction("--mem-fraction-static", 0.8, True)
    fit = judge("spark1", snapshot(40), 4, 1, fraction, memory, sample)
    share = int(0.8 * memory.total)
    assert (fit.verdict, fit.need, fit.free) == ("fits", share, memory.available)
    assert fit.sentence() == (
        "needs about 97.4 GiB of 113.1 GiB free (weights 40.0 GiB: 1 of 4 TP ranks; "
        "--mem-fraction-static 0.8 of 121.7 GiB unified memory: 97.4 GiB)")
    short = judge("spark1", snapshot(40), 4, 1, Fraction("--mem-fraction-static", 0.95, True),
                  memory, sample)
    assert short.verdict == "short" and short.sentence().endswith(": it does not fit")
    # weights beyond the share: the weights count
    heavy = judge("spark1", snapshot(120), 4, 1, fraction, memory, sample)
    assert heavy.verdict == "short" and heavy.need == 120 * GiB + 2**20


def test_h200_counts_the_fraction_of_each_gpus_total() -> None:
    gpus, note = parse_gpus((FIX / "nvidia-smi-h200/query-busy.csv").read_text())
    two = [gpus[0], gpus[0].__class__(**{**gpus[0].__dict__, "index": 1})]
    memory = NodeMemory(2000 * GiB, 1900 * GiB)
    sample = NodeSample(memory.total, memory.available, False, 0.0, (0, 0), two, [], note)
    fit = judge("h1", snapshot(30, tp=8), 8, 2, Fraction("--gpu-memory-utilization", 0.9, False),
                memory, sample)
    total = 2 * 143771 * 2**20
    assert fit.verdict == "fits" and fit.need == int(0.9 * total)
    assert fit.free == 2 * (143771 - 1011) * 2**20
    assert "(the engine's default) of 280.8 GiB on 2 GPUs" in fit.basis


def test_no_gpu_counts_the_weights_against_memavailable_and_says_so() -> None:
    memory = NodeMemory(24 * GiB, 20 * GiB)
    sample = NodeSample(memory.total, memory.available, False, 0.0, (0, 0), [], [], "no nvidia-smi")
    fit = judge("node2", snapshot(30), 4, 1, Fraction("--mem-fraction-static", 0.8, True),
                memory, sample)
    assert fit.verdict == "short" and fit.need == 30 * GiB + 2**20 and fit.free == 20 * GiB
    assert ("no GPU: --mem-fraction-static 0.8 has nothing to apply to, the weights alone "
            "counted against MemAvailable") in fit.basis
    err = WontFit([fit])
    assert str(err).startswith("node2: needs about 30.0 GiB of 20.0 GiB free (weights 30.0 GiB: "
                               "1 of 4 TP ranks; no GPU")
    assert "nothing was started" in str(err) and "--no-memory-check" in str(err)


def test_what_cannot_be_known_is_said() -> None:
    memory, sample = gb10()
    fraction = Fraction("--mem-fraction-static", 0.8, True)
    missing = judge("n", Snapshot(None, missing="/hf/x/snapshots: No such file or directory"),
                    4, 1, fraction, memory, sample)
    assert missing.verdict == "unknown" and "no snapshot found" in missing.sentence()
    empty = judge("n", Snapshot("/hf/snap"), 4, 1, fraction, memory, sample)
    assert empty.verdict == "unknown" and "no *.safetensors in /hf/snap" in empty.why
    broken = NodeSample(memory.total, memory.available, False, 0.0, (0, 0), [], [],
                        "NVIDIA-SMI has failed")
    assert judge("n", snapshot(1), 4, 1, fraction, memory, broken).why == \
        "its GPUs could not be read: NVIDIA-SMI has failed"
    picks = Fraction("--mem-fraction-static", None, False,
                     "--mem-fraction-static not set: the engine picks its share at start")
    weights_only = judge("n", snapshot(1), 4, 1, picks, memory, sample)
    assert weights_only.verdict == "fits" and weights_only.need == GiB + 2**20
    assert "the engine picks its share at start, the weights alone counted" in weights_only.basis
    assert NodeFit("n", "unknown", why="x").said() == "n: memory: cannot tell whether it fits: x"
