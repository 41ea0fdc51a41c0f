"""The packing pipeline's edges: row layouts that make blocks of every kind (interleaved rows
capped per block, a chunk spanning blocks, O_DIRECT blocks with a ragged end, rows too odd for
O_DIRECT), the ledger's chunk hashes against an independent CRC-32, what a sampled verification
catches, and a shard cut short."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import numpy as np
import pytest

from sparktui.agents import sparse_rows
from tests.staging.ckpt import Checkpoint, make_checkpoint
from tests.staging.test_agent import assert_exact, done, job, run_agent


def chunk_hashes(data: bytes, rows_per_chunk: int, row_bytes: int) -> list[str]:
    step = rows_per_chunk * row_bytes
    return [f"{zlib.crc32(data[i:i + step]):08x}" for i in range(0, len(data), step)]


@pytest.mark.parametrize(("rows", "cols", "scale_cols", "what"), [
    ((200001, 200003), 8, 1, "12-byte rows: blocks capped at MAX_BLOCK_ROWS, one chunk spans blocks"),
    ((20001, 20003), 4096, 4, "4112-byte rows: O_DIRECT blocks of 256-row multiples, a ragged end"),
    ((8001, 8003), 8193, 1, "8197-byte rows: no aligned block size, written through the page cache"),
])
def test_layouts_pack_byte_exact_with_the_ledger_hashes(tmp_path: Path, rows: tuple[int, int], cols: int,
                                                        scale_cols: int, what: str) -> None:
    ckpt = make_checkpoint(tmp_path / "hf", rows=rows, cols=cols, scale_cols=scale_cols)
    dst = tmp_path / "d"
    rc, events = run_agent(job(ckpt, dst))
    assert rc == 0, events[-1]
    assert_exact(ckpt, dst)
    for rank in range(4):
        ledger = json.loads((dst / f".sparktui-ledger-r{rank}of4.json").read_text())["files"]
        for layer in (1, 14):
            entry = ledger[f"engram-l{layer}-r{rank}of4.bin"]
            assert entry["rows_per_chunk"] == max(1, sparse_rows.CHUNK_TARGET // entry["row_bytes"])
            assert entry["chunks"] == chunk_hashes(ckpt.expected(layer, rank, 4), entry["rows_per_chunk"],
                                                   entry["row_bytes"]), what
    rc, events = run_agent(job(ckpt, dst))  # sampled verification of every layout
    assert {f["status"] for f in done(events)["files"]} == {"verified"}


def test_block_sizes_follow_the_layout() -> None:
    def packed(*widths: int, rows: int = 10**6) -> sparse_rows.PackedFile:
        tensors = [sparse_rows.TensorInfo(f"t{i}", "U8", (rows, w), 0, rows * w, "/x")
                   for i, w in enumerate(widths)]
        return sparse_rows.PackedFile("f", 1, 0, 1, tensors, 0, rows)

    assert packed(4096, 16).rows_per_block % 256 == 0 and packed(4096, 16).aligned
    assert packed(8, 4).rows_per_block == sparse_rows.MAX_BLOCK_ROWS and packed(8, 4).aligned
    assert not packed(8193, 4).aligned  # 4096 rows of 8197 bytes would be 32 MiB
    assert packed(4097).rows_per_block == 4096 and packed(4097).aligned  # odd rows: every 4096th
    assert packed(1 << 24).rows_per_block == 1  # a row larger than a block is a block


def test_write_all_direct_with_a_ragged_end(tmp_path: Path) -> None:
    block = sparse_rows.Block(3 * sparse_rows.DIRECT_ALIGN)
    payload = os.urandom(3 * sparse_rows.DIRECT_ALIGN)
    block.view[:] = payload
    path = tmp_path / "out"
    fd = sparse_rows._create(str(path))
    try:
        direct = sparse_rows._set_direct(fd, True)  # False where the filesystem has no O_DIRECT
        direct = sparse_rows._write_all(fd, block.view[:2 * sparse_rows.DIRECT_ALIGN], direct)
        direct = sparse_rows._write_all(fd, block.view[:1000], direct)  # a file's ragged end
        assert direct is False
    finally:
        os.close(fd)
    assert path.read_bytes() == payload[:2 * sparse_rows.DIRECT_ALIGN] + payload[:1000]


@pytest.fixture
def ckpt(tmp_path: Path) -> Checkpoint:
    return make_checkpoint(tmp_path / "hf", rows=(4001, 4003), cols=1024, scale_cols=2)


def test_sampled_verification_catches_a_changed_first_row(ckpt: Checkpoint, tmp_path: Path) -> None:
    dst = tmp_path / "d"
    assert run_agent(job(ckpt, dst))[0] == 0
    target = dst / "engram-l14-r2of4.bin"
    with target.open("r+b") as f:  # the first window of every file is always compared
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))
    rc, events = run_agent(job(ckpt, dst))  # the default: sampled windows, then repack
    assert rc == 0
    status = {f["name"]: (f["status"], f.get("reason", "")) for f in done(events)["files"]}
    state, reason = status.pop(target.name)
    assert state == "packed" and reason.startswith("packed rows 2001-") and "differ from the ledger" in reason
    assert {s for s, _ in status.values()} == {"verified"}
    assert_exact(ckpt, dst)


def test_a_source_changed_in_place_with_its_mtime_kept_is_caught(ckpt: Checkpoint, tmp_path: Path) -> None:
    """Size, mtime and header unchanged (a copy that keeps times): only the rows tell."""
    dst = tmp_path / "d"
    assert run_agent(job(ckpt, dst))[0] == 0
    name = "model.layers.1.engram.weight"
    blob = (ckpt.snapshot / ckpt.shard_of[name]).resolve()
    (tensor,) = [t for t in sparse_rows.tensors_in(str(blob)) if t.name == name]
    st = blob.stat()
    weight = ckpt.tensors[name].copy()
    weight[0, 0] ^= 0xFF  # row 0: rank 0's first window
    with blob.open("r+b") as f:
        f.seek(tensor.start)
        f.write(weight[0, :1].tobytes())
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns))
    ckpt.tensors[name] = weight
    rc, events = run_agent(job(ckpt, dst, verify_only=True))
    assert rc == 0
    stale = [(f["name"], f["reason"]) for f in done(events)["files"] if f["status"] == "stale"]
    assert len(stale) == 1 and stale[0][0] == "engram-l1-r0of4.bin"
    assert stale[0][1].startswith("source rows 0-") and stale[0][1].endswith("changed")
    assert run_agent(job(ckpt, dst))[0] == 0
    assert_exact(ckpt, dst)


def test_a_shard_cut_short_is_a_sentence(ckpt: Checkpoint, tmp_path: Path) -> None:
    blob = (ckpt.snapshot / ckpt.shard_of["model.layers.14.engram.weight"]).resolve()
    os.truncate(blob, blob.stat().st_size // 2)
    dst = tmp_path / "d"
    rc, events = run_agent(job(ckpt, dst))
    assert rc == 1
    assert events[-1]["event"] == "error"
    assert f"{blob}: ends before model.layers.14.engram." in events[-1]["message"]
    names = sorted(p.name for p in dst.iterdir())
    assert not [n for n in names if sparse_rows.TMP_MARK in n]
    assert "engram-l14-r3of4.bin" not in names  # its rows are past the cut
    for n in names:  # what has its final name is complete
        if n.endswith(".bin"):
            layer, rank = int(n.split("-l")[1].split("-")[0]), int(n.split("-r")[1][0])
            assert (dst / n).read_bytes() == ckpt.expected(layer, rank, 4)


def test_numpy_agrees_on_the_interleaving(ckpt: Checkpoint) -> None:
    """The fixture's own expectation: weight row, then scale row (a guard on the guard)."""
    data = ckpt.expected(1, 0, 4)
    w = ckpt.tensors["model.layers.1.engram.weight"]
    s = ckpt.tensors["model.layers.1.engram.scale"]
    assert data[:1024] == w[0].tobytes() and data[1024:1032] == s[0].tobytes()
    assert len(data) == 1000 * (1024 + 8) and np.frombuffer(data, np.uint8).size == len(data)
