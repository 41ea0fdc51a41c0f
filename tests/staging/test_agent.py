"""The sparse-rows agent on this machine: byte-exact packing, the ledger, verification, repacking
only what changed, and the safety rules (min_free, full disk, SIGTERM)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sparktui.agents import sparse_rows
from sparktui.backend.staging import agent_argv, agent_input
from tests.staging.ckpt import Checkpoint, make_checkpoint

AGENT = Path(sparse_rows.__file__)
# the node's python3, isolated (-I -S): proves the agent needs nothing but the standard library
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def start_agent(spec: dict[str, Any]) -> subprocess.Popen[str]:
    """The agent started as staging starts it, its stdin sent and closed; read its stdout."""
    proc = subprocess.Popen(agent_argv(spec, PYTHON), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdin is not None
    proc.stdin.write(agent_input())
    proc.stdin.close()
    return proc

Run = Callable[..., tuple[int, list[dict[str, Any]]]]


@pytest.fixture
def ckpt(tmp_path: Path) -> Checkpoint:
    return make_checkpoint(tmp_path / "hf")


def job(ckpt: Checkpoint, dst: Path, **kw: Any) -> dict[str, Any]:
    return {"src": str(ckpt.snapshot), "dst": str(dst), "id": "engram", "world": 4,
            "ranks": [0, 1, 2, 3], "min_free_bytes": 0, "node": "testnode", **kw}


def run_agent(spec: dict[str, Any], timeout: float = 120, *, python: str = PYTHON,
              stdin: str | None = None, prefix: list[str] | None = None,
              env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, list[dict[str, Any]]]:
    """The agent run as staging runs it (``stdin``: ``agent_input()`` unless given), under
    ``prefix`` (``setpriv ...``); its exit code and events. It writes nothing to stderr."""
    proc = subprocess.run([*(prefix or []), *agent_argv(spec, python)],
                          input=agent_input() if stdin is None else stdin, capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)
    assert proc.stderr == "", proc.stderr
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]


def done(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[-1]["event"] == "done", events[-1]
    return events[-1]


def mtimes(dst: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(dst.iterdir())}


def assert_exact(ckpt: Checkpoint, dst: Path) -> None:
    for layer in (1, 14):
        for rank in range(4):
            got = (dst / f"engram-l{layer}-r{rank}of4.bin").read_bytes()
            assert got == ckpt.expected(layer, rank, 4), f"layer {layer} rank {rank}"


def test_packs_every_rank_and_layer_byte_exact(ckpt: Checkpoint, tmp_path: Path) -> None:
    dst = tmp_path / "nvme" / "engram"
    rc, events = run_agent(job(ckpt, dst))
    assert rc == 0
    result = done(events)
    assert sorted(f["name"] for f in result["files"]) == sorted(
        f"engram-l{layer}-r{r}of4.bin" for layer in (1, 14) for r in range(4))
    assert all(f["status"] == "packed" for f in result["files"])
    assert_exact(ckpt, dst)
    assert {e["phase"] for e in events if e["event"] == "progress"} >= {"scan", "pack"}
    for rank in range(4):
        ledger = json.loads((dst / f".sparktui-ledger-r{rank}of4.json").read_text())
        assert set(ledger["files"]) == {f"engram-l1-r{rank}of4.bin", f"engram-l14-r{rank}of4.bin"}
        entry = ledger["files"][f"engram-l1-r{rank}of4.bin"]
        rows = 1001
        assert entry["rows"] == [rank * rows // 4, (rank + 1) * rows // 4]
        assert entry["row_bytes"] == 256 + 2 * 4
        assert [t["name"] for t in entry["tensors"]] == ["model.layers.1.engram.weight",
                                                         "model.layers.1.engram.scale"]
        assert entry["tensors"][1]["dtype"] == "F32" and entry["tensors"][1]["shape"] == [1001, 2]
        shard = entry["tensors"][0]["shard"]
        assert "/blobs/" in shard["path"] and shard["size"] > 0 and len(shard["header_sha256"]) == 64
        assert entry["chunks"] and entry["chunk_hash"] == "crc32" and entry["packer_version"] == sparse_rows.PACKER_VERSION
    assert not [p for p in dst.iterdir() if sparse_rows.TMP_MARK in p.name]


def test_one_node_packs_only_its_ranks(ckpt: Checkpoint, tmp_path: Path) -> None:
    dst = tmp_path / "d"
    rc, _ = run_agent(job(ckpt, dst, ranks=[2]))
    assert rc == 0
    assert sorted(p.name for p in dst.iterdir()) == [
        ".sparktui-ledger-r2of4.json", "engram-l1-r2of4.bin", "engram-l14-r2of4.bin"]


def test_second_run_writes_nothing(ckpt: Checkpoint, tmp_path: Path) -> None:
    dst = tmp_path / "d"
    assert run_agent(job(ckpt, dst))[0] == 0
    before = mtimes(dst)
    rc, events = run_agent(job(ckpt, dst))
    assert rc == 0
    result = done(events)
    assert {f["status"] for f in result["files"]} == {"verified"}
    assert result["bytes_written"] == 0
    assert mtimes(dst) == before


def test_changed_tensor_repacks_only_its_files(ckpt: Checkpoint, tmp_path: Path) -> None:
    dst = tmp_path / "d"
    assert run_agent(job(ckpt, dst))[0] == 0
    before = mtimes(dst)
    scale = ckpt.tensors["model.layers.14.engram.scale"].copy()
    scale[500] += 1.0  # a row of rank 1 (rows 250-500) or 2 (501-751): 1003 rows, r1 = 250..501
    ckpt.replace("model.layers.14.engram.scale", scale)
    rc, events = run_agent(job(ckpt, dst))
    assert rc == 0
    status = {f["name"]: f["status"] for f in done(events)["files"]}
    assert status.pop("engram-l14-r1of4.bin") == "packed"
    assert set(status.values()) == {"verified"}
    after = mtimes(dst)
    assert after["engram-l14-r1of4.bin"] != before["engram-l14-r1of4.bin"]
    for name in before:
        if name.endswith(".bin") and name != "engram-l14-r1of4.bin":
            assert after[name] == before[name], name
    assert_exact(ckpt, dst)
    # the ledger now points at the new blob for every layer-14 file: a third run is quiet
    rc, events = run_agent(job(ckpt, dst))
    assert {f["status"] for f in done(events)["files"]} == {"verified"}


def test_flipped_bytes_are_caught_and_repacked(ckpt: Checkpoint, tmp_path: Path) -> None:
    dst = tmp_path / "d"
    assert run_agent(job(ckpt, dst))[0] == 0
    target = dst / "engram-l1-r3of4.bin"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    rc, events = run_agent(job(ckpt, dst, verify_only=True, sample="all"))
    assert rc == 0
    stale = [f for f in done(events)["files"] if f["status"] == "stale"]
    assert [(f["name"], f["reason"].startswith("packed rows")) for f in stale] == [
        ("engram-l1-r3of4.bin", True)]
    assert target.read_bytes() == bytes(data)  # verify-only wrote nothing
    rc, events = run_agent(job(ckpt, dst, sample="all"))
    assert rc == 0
    assert [f["name"] for f in done(events)["files"] if f["status"] == "packed"] == [target.name]
    assert_exact(ckpt, dst)


def test_min_free_refused_before_writing(ckpt: Checkpoint, tmp_path: Path) -> None:
    dst = tmp_path / "d"
    rc, events = run_agent(job(ckpt, dst, min_free_bytes=2**50))
    assert rc == 1
    message = events[-1]["message"]
    assert events[-1]["event"] == "error"
    assert message.startswith(f"testnode: not enough space at {dst}: ")
    assert "free, 1024.0 TiB needed" in message and "nothing was written" in message
    assert not any(dst.iterdir())


def test_sigterm_mid_pack_then_rerun_is_byte_identical(tmp_path: Path) -> None:
    big = make_checkpoint(tmp_path / "hf", rows=(40001, 40003), cols=4096, scale_cols=8)
    dst = tmp_path / "d"
    proc = start_agent(job(big, dst))
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        if event.get("phase") == "pack" and event["bytes_done"] > 0:
            proc.send_signal(signal.SIGTERM)
            break
    rest = proc.stdout.read()
    assert proc.wait(30) == 143
    assert json.loads(rest.splitlines()[-1])["event"] == "error"
    for p in dst.iterdir():  # whatever has its final name is complete and in the ledger
        assert sparse_rows.TMP_MARK not in p.name
        if p.suffix == ".bin":
            layer, rank = int(p.name.split("-l")[1].split("-")[0]), int(p.name.split("-r")[1][0])
            assert p.read_bytes() == big.expected(layer, rank, 4)
    rc, _ = run_agent(job(big, dst))
    assert rc == 0
    assert_exact(big, dst)


def fill(path: Path) -> None:
    """Take every free byte of the filesystem, as another writer would."""
    piece = b"\0" * (1 << 20)
    with path.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(piece)
        except OSError:
            pass
        for size in (4096, 1):
            try:
                while True:
                    f.write(piece[:size])
            except OSError:
                pass


@pytest.mark.realparts
def test_full_disk_mid_pack_then_rerun(tmp_path: Path) -> None:
    """A small tmpfs fills up while packing: a sentence, nothing that looks complete, and a
    consistent ledger; with room again the next run completes."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    ckpt = make_checkpoint(tmp_path / "hf", rows=(8001, 8003), cols=1024, scale_cols=4)
    total = sum(len(ckpt.expected(layer, r, 4)) for layer in (1, 14) for r in range(4))
    dst = tmp_path / "small"
    dst.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={total * 2},mode=0755", "tmpfs", str(dst)],
                   check=True)
    try:
        proc = start_agent(job(ckpt, dst))
        assert proc.stdout is not None
        events = []
        files_seen: list[str] = []
        for line in proc.stdout:
            events.append(json.loads(line))
            if events[-1].get("phase") == "pack" and events[-1]["file"] not in files_seen:
                files_seen.append(events[-1]["file"])
            if len(files_seen) == 3:  # two files are complete (or being finished)
                # another writer takes the space between two chunks
                proc.send_signal(signal.SIGSTOP)
                fill(dst / "someone-else")
                proc.send_signal(signal.SIGCONT)
                break
        events += [json.loads(line) for line in proc.stdout]
        rc = proc.wait(30)
        assert rc == 1
        assert events[-1]["event"] == "error"
        assert "No space left on device" in events[-1]["message"]
        assert "the partial file was removed" in events[-1]["message"]
        names = [p.name for p in dst.iterdir() if p.name != "someone-else"]
        assert not [n for n in names if sparse_rows.TMP_MARK in n]
        ledgers = {}
        for rank in range(4):
            path = dst / f".sparktui-ledger-r{rank}of4.json"
            ledgers[rank] = json.loads(path.read_text())["files"] if path.exists() else {}
        packed = {n for n in names if n.endswith(".bin")}
        assert packed == {n for files in ledgers.values() for n in files}
        assert len(packed) < 8  # files still being finished when the disk filled may be gone too
        for n in packed:
            layer, rank = int(n.split("-l")[1].split("-")[0]), int(n.split("-r")[1][0])
            assert (dst / n).read_bytes() == ckpt.expected(layer, rank, 4)
        (dst / "someone-else").unlink()
        rc, events = run_agent(job(ckpt, dst))
        assert rc == 0
        assert_exact(ckpt, dst)
    finally:
        subprocess.run(["umount", str(dst)], check=False)


def test_bad_job_is_a_sentence() -> None:
    rc, events = run_agent({"src": "/nonexistent", "dst": "/tmp/x", "id": "engram", "world": 4,
                            "ranks": [0], "node": "n1"})
    assert rc == 1
    assert events[-1] == {"event": "error",
                          "message": "n1: checkpoint folder /nonexistent does not exist"}


def test_row_slices_are_numpy_slices() -> None:
    rows = 1003
    bounds = [sparse_rows.row_range(r, 4, rows) for r in range(4)]
    assert bounds == [(0, 250), (250, 501), (501, 752), (752, 1003)]
    assert np.concatenate([np.arange(rows)[a:b] for a, b in bounds]).tolist() == list(range(rows))
