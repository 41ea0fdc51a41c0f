"""Launch latency on the real 4-node test cluster (sparktui_testbed; needs root).

For several runs of `sparktui up RECIPE --cluster testbed --wait` with a demo image that is
ready at once, prints the time from invocation until every container runs (the last
`rank N: booting` line) and until ready is reported (`ready:` line), then `down` between runs.

    python bench/launch.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # sparktui_testbed sits at the repository root, outside the wheel

import sparktui_testbed  # noqa: E402


def testbed_cluster() -> str:
    return str(sparktui_testbed.up(4).cluster_file)


def instant_recipe(folder: Path) -> Path:
    text = (ROOT / "sparktui" / "recipes" / "demo-tp4" / "recipe.toml").read_text()
    text = text.replace('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"')
    (folder / "bench-instant").mkdir(exist_ok=True)
    path = folder / "bench-instant" / "recipe.toml"
    path.write_text(text)
    return path.parent


def one_run(recipe: Path, cluster: str, env: dict[str, str]) -> tuple[float, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "up", str(recipe), "--cluster", cluster,
                             "--wait"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    booting: set[str] = set()
    t_running = t_ready = float("nan")
    for line in proc.stdout:
        if ": booting" in line and line.startswith("rank "):
            booting.add(line.split(":")[0])
            if len(booting) == 4:
                t_running = time.monotonic() - t0
        if line.startswith("ready:"):
            t_ready = time.monotonic() - t0
    if proc.wait() != 0:
        raise SystemExit(f"up failed (exit {proc.returncode})")
    subprocess.run([sys.executable, "-m", "sparktui", "down", str(recipe), "--cluster", cluster],
                   cwd=ROOT, env=env, capture_output=True, check=True)
    return t_running, t_ready


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    cluster = testbed_cluster()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_STATE_HOME": f"{tmp}/state", "XDG_CONFIG_HOME": f"{tmp}/config"}
        recipe = instant_recipe(Path(tmp))
        one_run(recipe, cluster, env)  # warm-up: page cache, first container start
        results = [one_run(recipe, cluster, env) for _ in range(args.runs)]
    running = [r for r, _ in results]
    ready = [r for _, r in results]
    print(f"sparktui up --wait on the 4-node test cluster, {args.runs} runs (after one warm-up)")
    print(f"  all containers running: median {statistics.median(running):.2f} s "
          f"(min {min(running):.2f}, max {max(running):.2f})  target < 5 s")
    print(f"  ready reported:         median {statistics.median(ready):.2f} s "
          f"(min {min(ready):.2f}, max {max(ready):.2f})  target < 6 s")


if __name__ == "__main__":
    main()
