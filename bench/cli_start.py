"""CLI start-up time against the interpreter's own start, in one run.

Each command is a new process, as a user (or a shell loop, or tab completion) runs it:

- baselines: `python -c pass` and `python -c "import tomllib"` (the same interpreter);
- `sparktui --version`, `sparktui completion bash`, `sparktui validate SEED` (the seed recipe,
  `dsv41-flash-4x-mia`, on the local cluster) and `sparktui status demo-tp4` of a stopped recipe
  (local cluster, an empty state folder: nothing runs).

One warm-up round (warm page cache and bytecode), then --runs rounds; the commands alternate
within a round so a neighbour's load falls on all of them alike. Prints the median (and range)
of wall time, the median CPU time (user+sys, steadier on a shared machine), and each command's
ratio to the larger baseline. Targets (issue 13): --version <= 0.15 s and validate <= 0.35 s,
or each within 3x of the larger baseline.

    python bench/cli_start.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "recipes" / "dsv41-flash-4x-mia"
sys.path.insert(0, str(ROOT))

from bench.wheel import compiled  # noqa: E402


def sparktui() -> list[str]:
    """The installed console script next to this interpreter, as a user runs it; else -m."""
    script = Path(sys.executable).parent / "sparktui"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sparktui"]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of ``cmd``; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9, help="rounds after the warm-up (at least 5)")
    args = ap.parse_args()
    runs = max(5, args.runs)
    compiled()  # the checkout's commands are timed: their bytecode as an install has it
    home = Path(tempfile.mkdtemp(prefix="sparktui-cli-start-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKTUI_")}
    env.update(XDG_STATE_HOME=str(home / "state"), XDG_CONFIG_HOME=str(home / "config"),
               XDG_CACHE_HOME=str(home / "cache"))
    st = sparktui()
    cases: list[tuple[str, list[str]]] = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("python -c 'import tomllib'", [sys.executable, "-c", "import tomllib"]),
        ("sparktui --version", [*st, "--version"]),
        ("sparktui completion bash", [*st, "completion", "bash"]),
        ("sparktui validate SEED", [*st, "validate", str(SEED)]),
        ("sparktui status (stopped)", [*st, "status", "demo-tp4"]),
    ]
    walls: dict[str, list[float]] = {name: [] for name, _ in cases}
    cpus: dict[str, list[float]] = {name: [] for name, _ in cases}
    try:
        for _name, cmd in cases:  # warm-up: page cache, __pycache__, the plan key
            timed(cmd, env)
        for _ in range(runs):
            for name, cmd in cases:
                wall, cpu = timed(cmd, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    med = {name: statistics.median(v) for name, v in walls.items()}
    base = max(med["python -c pass"], med["python -c 'import tomllib'"])
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; median of {runs} runs "
          f"after a warm-up; ratio = median / larger baseline ({base * 1000:.0f} ms)")
    print(f"{'command':<28} {'wall median':>11} {'(min-max)':>15} {'cpu median':>10} {'ratio':>6}")
    for name, _ in cases:
        lo, hi = min(walls[name]), max(walls[name])
        print(f"{name:<28} {med[name] * 1000:>8.0f} ms {f'({lo * 1000:.0f}-{hi * 1000:.0f})':>15} "
              f"{statistics.median(cpus[name]) * 1000:>7.0f} ms {med[name] / base:>5.1f}x")
    for name, limit in (("sparktui --version", 0.15), ("sparktui validate SEED", 0.35)):
        ok = med[name] <= limit or med[name] <= 3 * base
        print(f"target {name}: <= {limit:.2f} s or <= 3x baseline: {'met' if ok else 'MISSED'} "
              f"({med[name]:.3f} s, {med[name] / base:.1f}x)")


if __name__ == "__main__":
    main()
