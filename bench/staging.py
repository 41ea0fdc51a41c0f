"""Staging throughput against `cp` of the same bytes on the same filesystem, in one run.

Generates an HF checkpoint (safetensors, blobs + snapshot symlinks) holding at least --gib GiB
of engram rows in two layers (weight + scale, interleaved when packed), then measures, in
--runs alternating rounds (median; each from a warm page cache, each ending in `sync`):

- pack: the sparse-rows agent packing every rank of world 4 (the same process a node runs: the
  command and stdin staging sends, run by the node's ``python3``, here ``/usr/bin/python3``);
- cp: `cp` of the checkpoint shards, the same byte volume, into the same filesystem;

then verify: a later agent run (sampled verification, writes nothing), --runs times, as a
fraction of pack: the whole process (interpreter start, loading the agent and its imports
included) and the agent's own time (its `done` event: scan, ledgers, the sampled windows).

Targets (issue 13): pack >= 0.8x cp on a run where cp exceeds 900 MiB/s; verify <= 2 % of pack.

``--login-shell SHELL`` runs each agent as sshd runs a node's command: ``SHELL -c`` the string
``nodeshell.login_shell_command`` makes (issue 23: a few ms for ``/bin/sh`` and ``base64``).

    python bench/staging.py [--gib 2] [--dir /var/tmp] [--runs 5] [--python PATH] [--login-shell SHELL]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

from sparktui.backend.nodeshell import login_shell_command  # noqa: E402
from sparktui.backend.staging import agent_argv, agent_input  # noqa: E402

NODE_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
SNAP = "hub/models--deepseek-ai--DeepSeek-V4.1-Flash/snapshots/dba1be0a40aa45a94ad051997016db3960a90277"


def make(hf: Path, gib: float) -> tuple[Path, int]:
    snap = hf / SNAP
    snap.mkdir(parents=True)
    blobs = snap.parent.parent / "blobs"
    blobs.mkdir()
    cols, scale_cols = 4096, 4  # an fp8 row and its fp32 scales, as in the operator's tables
    rows = int(gib * 2**30 / 2 / (cols + 4 * scale_cols)) | 1  # odd: not divisible by 4
    rng = np.random.default_rng(0)
    engram = 0
    for i, layer in enumerate((1, 14)):
        weight = rng.integers(0, 255, (rows, cols), dtype=np.uint8)
        scale = rng.standard_normal((rows, scale_cols)).astype(np.float32)
        engram += weight.nbytes + scale.nbytes
        blob = blobs / f"shard{i}"
        save_file({f"model.layers.{layer}.engram.weight": weight,
                   f"model.layers.{layer}.engram.scale": scale,
                   f"model.layers.{layer}.mlp.gate.weight": np.ones((64, 64), np.float32)}, str(blob))
        (snap / f"model-0000{i + 1}-of-00002.safetensors").symlink_to(os.path.relpath(blob, snap))
        del weight, scale
    return snap, engram


def warm(paths: list[Path]) -> None:
    """Both contenders read from the page cache, as a node re-reading its NAS snapshot would."""
    for p in paths:
        with p.open("rb") as f:
            while f.read(64 << 20):
                pass


def agent(snap: Path, dst: Path, python: str, login_shell: str | None = None,
          **kw: object) -> tuple[float, dict[str, object]]:
    job = {"src": str(snap), "dst": str(dst), "id": "engram", "world": 4, "ranks": [0, 1, 2, 3],
           "min_free_bytes": 0, "node": "bench", **kw}
    stdin = agent_input()  # made once, before the clock: staging makes it once a process
    argv = agent_argv(job, python)
    if login_shell is not None:
        argv = [login_shell, "-c", login_shell_command(argv)]
    t0 = time.perf_counter()
    out = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                         check=True).stdout
    return time.perf_counter() - t0, json.loads(out.splitlines()[-1])


def sync() -> None:
    os.sync()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--dir", default=None, help="filesystem to run on (default: the temp dir)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default=NODE_PYTHON, help="the node's python3 (default: %(default)s)")
    ap.add_argument("--login-shell", default=None,
                    help="run each agent through this shell as sshd does (default: directly)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        snap, engram = make(base / "hf", args.gib)
        shards = [p.resolve() for p in sorted(snap.glob("*.safetensors"))]
        volume = sum(p.stat().st_size for p in shards)
        packs, cps = [], []
        for _ in range(args.runs):
            for d in ("packed", "copied"):
                shutil.rmtree(base / d, ignore_errors=True)
            (base / "copied").mkdir()
            warm(shards)
            sync()
            t0 = time.perf_counter()
            subprocess.run(["cp", *map(str, shards), str(base / "copied")], check=True)
            sync()
            cps.append(time.perf_counter() - t0)
            shutil.rmtree(base / "copied")
            warm(shards)
            sync()
            t0 = time.perf_counter()
            _, result = agent(snap, base / "packed", args.python, args.login_shell)
            sync()
            packs.append(time.perf_counter() - t0)
            assert result["event"] == "done", result
        verifies, own = [], []
        for _ in range(max(args.runs, 11)):  # tens of ms each: more rounds, a steadier median
            verify_s, result = agent(snap, base / "packed", args.python, args.login_shell)
            assert result["bytes_written"] == 0 and {f["status"] for f in result["files"]} == {"verified"}
            verifies.append(verify_s)
            own.append(float(result["seconds"]))
        full_s, _ = agent(snap, base / "packed", args.python, args.login_shell, sample="all")
    pack_s, cp_s = statistics.median(packs), statistics.median(cps)
    verify_s, own_s = statistics.median(verifies), statistics.median(own)
    cp_rate, ratio = volume / cp_s / 2**20, (engram / pack_s) / (volume / cp_s)
    print(f"checkpoint: {engram / 2**30:.2f} GiB of engram rows (2 layers, world 4); cp volume "
          f"{volume / 2**30:.2f} GiB; median of {args.runs}, each ending in sync; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; the agent run by {args.python}"
          + (f" through {args.login_shell} -c" if args.login_shell else ""))
    print(f"pack:   {pack_s:.2f} s  {engram / pack_s / 2**20:.0f} MiB/s  (runs: "
          f"{', '.join(f'{t:.2f}' for t in packs)})")
    print(f"cp:     {cp_s:.2f} s  {cp_rate:.0f} MiB/s  (runs: {', '.join(f'{t:.2f}' for t in cps)})")
    valid = "" if cp_rate > 900 else "; cp was under 900 MiB/s: not a run the target counts"
    print(f"ratio:  pack throughput = {ratio:.2f} x cp   (target >= 0.8: "
          f"{'met' if ratio >= 0.8 else 'MISSED'}{valid})")
    print(f"verify: {verify_s * 1000:.0f} ms = {100 * verify_s / pack_s:.1f} % of pack, the whole process "
          f"(median of {len(verifies)}); "
          f"the agent's own {own_s * 1000:.0f} ms = {100 * own_s / pack_s:.1f} %   (target <= 2 %); "
          f"every chunk (--sample all): {full_s:.2f} s")


if __name__ == "__main__":
    main()
