"""What a ``sparse-rows`` staging job selects and how many bytes it writes.

Reads only safetensors headers (8-byte little-endian length + JSON), never tensor data.
"""

from __future__ import annotations

import fnmatch
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")
MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    end: int
    shard: Path

    @property
    def rows(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def row_bytes(self) -> int:
        return (self.end - self.start) // self.rows if self.rows else 0


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """The header JSON and the offset where tensor data starts."""
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors file")
        (length,) = struct.unpack("<Q", raw)
        if length > MAX_HEADER:
            raise ValueError(f"{path}: header of {length} bytes is not plausible")
        header = json.loads(f.read(length))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    return header, 8 + length


def tensors_in(path: Path) -> list[TensorInfo]:
    header, base = read_header(path)
    out = []
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        start, end = info["data_offsets"]
        out.append(TensorInfo(name, str(info["dtype"]), tuple(info["shape"]),
                              base + int(start), base + int(end), path))
    return out


def selects(name: str, job_id: str, globs: list[str] | None) -> bool:
    if globs:
        return any(fnmatch.fnmatchcase(name, g) for g in globs)
    return job_id in name.split(".")


def layer_of(name: str) -> int | None:
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def row_range(rank: int, world: int, rows: int) -> tuple[int, int]:
    """Rank ``rank`` of ``world`` owns rows ``[r*rows//W, (r+1)*rows//W)``."""
    return rank * rows // world, (rank + 1) * rows // world


def selected_tensors(src: Path, job_id: str, globs: list[str] | None) -> dict[int, list[TensorInfo]]:
    """Selected tensors by layer, weight first then the rest by name (the packing order)."""
    layers: dict[int, list[TensorInfo]] = {}
    for shard in sorted(src.glob("*.safetensors")):
        for t in tensors_in(shard):
            layer = layer_of(t.name)
            if layer is not None and selects(t.name, job_id, globs):
                layers.setdefault(layer, []).append(t)
    for tensors in layers.values():
        tensors.sort(key=lambda t: (not t.name.endswith(".weight"), t.name))
    return dict(sorted(layers.items()))


def bytes_for_ranks(layers: dict[int, list[TensorInfo]], ranks: list[int], world: int) -> int:
    total = 0
    for tensors in layers.values():
        for t in tensors:
            for r in ranks:
                lo, hi = row_range(r, world, t.rows)
                total += (hi - lo) * t.row_bytes
    return total
