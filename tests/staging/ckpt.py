"""A real Hugging Face cache layout written by the safetensors library, for staging tests and
benchmarks: blobs named by content hash, snapshot symlinks into them, several shards, the index
JSON, engram weight and scale tensors in two layers split across shards, other tensors around."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

REPO = "deepseek-ai/DeepSeek-V4.1-Flash"
REVISION = "dba1be0a40aa45a94ad051997016db3960a90277"


@dataclass
class Checkpoint:
    hf: Path
    snapshot: Path
    tensors: dict[str, np.ndarray]
    shard_of: dict[str, str]  # tensor name -> shard file name
    shard_names: list[str] = field(default_factory=list)

    def write_shard(self, shard: str) -> None:
        """(Re)write one shard the way the hub does: a new blob, the symlink moved to it."""
        names = [n for n, s in self.shard_of.items() if s == shard]
        tmp = self.hf / f"{shard}.tmp"
        save_file({n: self.tensors[n] for n in names}, str(tmp), metadata={"format": "pt"})
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        blobs = self.snapshot.parent.parent / "blobs"
        blob = blobs / digest
        os.replace(tmp, blob)
        link = self.snapshot / shard
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, self.snapshot))

    def replace(self, name: str, array: np.ndarray) -> None:
        self.tensors[name] = array
        self.write_shard(self.shard_of[name])

    def expected(self, layer: int, rank: int, world: int, job_id: str = "engram") -> bytes:
        """numpy's row slices of the layer's tensors, weight row then scale row."""
        names = sorted((n for n in self.tensors if f".layers.{layer}." in n and job_id in n.split(".")),
                       key=lambda n: (not n.endswith(".weight"), n))
        rows = self.tensors[names[0]].shape[0]
        lo, hi = rank * rows // world, (rank + 1) * rows // world
        parts = [np.ascontiguousarray(self.tensors[n][lo:hi]).view(np.uint8).reshape(hi - lo, -1)
                 for n in names]
        return np.concatenate(parts, axis=1).tobytes()


def make_checkpoint(hf: Path, rows: tuple[int, int] = (1001, 1003), cols: int = 256,
                    scale_cols: int = 2, seed: int = 0) -> Checkpoint:
    """Engram rows in layers 1 and 14 (row counts not divisible by 4); layer 1's weight and
    scale sit in different shards."""
    rng = np.random.default_rng(seed)
    snap = hf / "hub" / f"models--{REPO.replace('/', '--')}" / "snapshots" / REVISION
    snap.mkdir(parents=True)
    (snap.parent.parent / "blobs").mkdir()
    t: dict[str, np.ndarray] = {}
    where: dict[str, str] = {}
    shards = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]

    def add(name: str, arr: np.ndarray, shard: int) -> None:
        t[name] = arr
        where[name] = shards[shard]

    add("model.embed_tokens.weight", rng.standard_normal((64, 32)).astype(np.float32), 0)
    add("model.layers.1.engram.weight", rng.integers(0, 255, (rows[0], cols), dtype=np.uint8), 0)
    add("model.layers.1.mlp.down_proj.weight", rng.standard_normal((16, 16)).astype(np.float16), 0)
    add("model.layers.1.engram.scale", rng.standard_normal((rows[0], scale_cols)).astype(np.float32), 1)
    add("model.layers.2.self_attn.wqkv_a.weight", rng.standard_normal((8, 8)).astype(np.float32), 1)
    add("model.layers.14.engram.weight", rng.integers(0, 255, (rows[1], cols), dtype=np.uint8), 2)
    add("model.layers.14.engram.scale", rng.standard_normal((rows[1], scale_cols)).astype(np.float32), 2)
    add("model.layers.14.mlp.gate.weight", rng.standard_normal((4, 4)).astype(np.float32), 2)
    ckpt = Checkpoint(hf, snap, t, where, shards)
    for s in shards:
        ckpt.write_shard(s)
    index = {"metadata": {"total_size": sum(a.nbytes for a in t.values())}, "weight_map": where}
    (snap / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return ckpt


def sparse_checkpoint(hf: Path, repo: str, matrix_bytes: int, revision: str = REVISION) -> Path:
    """A one-file snapshot of ``repo`` whose header declares a U8 matrix of at least
    ``matrix_bytes`` and a 4 KiB norm, written sparse (the header alone takes a block: a file
    larger than the machine's memory costs nothing), ``refs/main`` naming it. Real: it opens
    with ``safetensors.safe_open``. Returns the file."""
    cols = 2**20
    rows = -(-matrix_bytes // cols)
    header = {"__metadata__": {"format": "pt"},
              "model.norm.weight": {"dtype": "F32", "shape": [1024], "data_offsets": [0, 4096]},
              "model.embed_tokens.weight": {"dtype": "U8", "shape": [rows, cols],
                                            "data_offsets": [4096, 4096 + rows * cols]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned, as the library writes it
    repo_dir = hf / "hub" / f"models--{repo.replace('/', '--')}"
    snap = repo_dir / "snapshots" / revision
    snap.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(revision)
    path = snap / "model.safetensors"
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        f.truncate(8 + len(text) + 4096 + rows * cols)
    return path
