"""The two commands operators run against a live run every day, on the real test cluster:
``sparktui logs RECIPE --grep PATTERN`` and ``sparktui status RECIPE`` while the containers run.

The demo recipe (ready at once, a rank a node) is launched on the test cluster of ``--nodes``
nodes (sparktui_testbed; root), then ``--lines`` SGLang-like lines per rank (``bench/grep.py``'s)
are put in front of each rank's run file as history, the saved cursors moved along, so the run
holds what a long-lived group holds while its engines go on writing. Then, alternating, one
warm-up each and the median of ``--repeat``, each a new process as a user runs it:

- ``sparktui logs RECIPE --grep PATTERN`` against ``grep -hE PATTERN`` over the same files
  (the files as they are at that moment: the ranks add a line a second); the same matching lines
  must come out (as a multiset of texts, the last second's lines aside);
- ``sparktui status RECIPE`` (every rank's state, health, checks, the nodes' telemetry);
- ``python -c pass``, the floor of any command;
- with ``--follower``: a ``sparktui watch`` follows the run meanwhile (as a console or a watch
  under systemd does: the usual case), so the files are written as the ranks write;
- with ``--baseline DIR``: the same two commands of another checkout (``DIR/.venv/bin/python
  -m sparktui``, run in ``DIR``: main, say) in the same turns, so a before and after come from
  the same run on a machine whose load varies.

Where each command's time goes comes from one more run of each with ``SPARKTUI_TIMING`` (see
``sparktui/core/timing.py``): imports, the plan, the SSH connects, finding the containers, the
catch-up, the search, health, telemetry.

Targets (issue 30): ``logs --grep`` of a live 4-rank run of 1 M lines within 2x ``grep -E`` plus
0.15 s; ``status`` of a running 4-rank recipe within 0.35 s (32 ranks: 0.6 s). Exit status 1
when one is missed.

    python bench/live_cli.py [--nodes 4] [--lines 250000] [--repeat 5] [--pattern '#running-req: 6[0-4],']
                             [--baseline /work/main] [--follower]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sparktui_testbed  # noqa: E402
from bench.demo_run import demo_recipe, world_edits  # noqa: E402
from bench.grep import rank_lines  # noqa: E402

SLUG = "bench-live"
LOGS_RATIO, LOGS_PLUS_S = 2.0, 0.15
STATUS_TARGET_S = {4: 0.35, 32: 0.6}


def timed(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env, cwd=cwd, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"live_cli: {' '.join(cmd)} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-800:]}")
    return seconds, done.stdout


def phases(cmd: list[str], env: dict[str, str], timing: Path) -> list[tuple[float, str]]:
    """One run with the timing log: each mark's time from the invocation."""
    timing.unlink(missing_ok=True)
    t0 = time.monotonic()
    timed(cmd, {**env, "SPARKTUI_TIMING": str(timing)})
    out = []
    for raw in timing.read_text().splitlines() if timing.exists() else []:
        stamp, _, what = raw.partition(" ")
        out.append((float(stamp) - t0, what))
    return out


def show_phases(title: str, marks: list[tuple[float, str]]) -> None:
    print(f"  where {title} spends its time (one run with SPARKTUI_TIMING; ms from the invocation):")
    shown = [(t, w) for t, w in marks if not w.startswith(("rank ", "docker ", "probe: rank"))]
    connects = [t for t, w in marks if w.startswith("ssh ") and w.endswith("connected")]
    for t, what in shown:
        if what.startswith("ssh ") and what.endswith("connected") and t != max(connects):
            continue  # the last connect stands for them all
        print(f"    {t * 1e3:7.0f}  {what}")


def start_follower(argv: list[str], env: dict[str, str], tmp: Path) -> subprocess.Popen[bytes]:
    """``sparktui watch`` (serving metrics on a free loopback port, so no restart policy is
    needed), once it says it is watching."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = tmp / "watch.err"
    proc = subprocess.Popen([*argv, "--metrics", str(port)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=err.open("wb"))
    end = time.monotonic() + 60
    while b"watching" not in err.read_bytes():
        if proc.poll() is not None or time.monotonic() > end:
            raise SystemExit(f"live_cli: the watch did not start: {err.read_text()[-800:]}")
        time.sleep(0.1)
    return proc


def history(run_dir: Path, world: int, lines: int) -> list[Path]:
    """``lines`` per rank in front of each rank's file, the cursors moved along."""
    cursors = json.loads((run_dir / "cursors.json").read_text())
    start = time.time() - 86400
    paths = []
    for rank in range(world):
        data = rank_lines(rank, lines, start)
        path = run_dir / f"r{rank}.log"
        path.write_bytes(data + path.read_bytes())
        cursors[str(rank)]["lines"] += data.count(b"\n")
        cursors[str(rank)]["bytes"] += len(data)
        paths.append(path)
    (run_dir / "cursors.json").write_text(json.dumps(cursors))
    return paths


def texts(out: bytes, sep: bytes) -> collections.Counter[bytes]:
    return collections.Counter(line.split(sep, 1)[1] for line in out.splitlines() if sep in line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=4, help="test nodes, a rank each (default 4)")
    ap.add_argument("--lines", type=int, default=250_000, help="history lines per rank (default 250,000)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pattern", default="#running-req: 6[0-4],")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="another checkout whose logs and status are timed in the same turns")
    ap.add_argument("--follower", action="store_true",
                    help="a sparktui watch follows the run meanwhile (a console's place)")
    args = ap.parse_args()
    world = args.nodes
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"live_cli: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python "
          f"{platform.python_version()}, load {load}", flush=True)
    tb = sparktui_testbed.up(world)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_STATE_HOME": f"{tmp}/state", "XDG_CONFIG_HOME": f"{tmp}/config"}
        demo_recipe(Path(tmp) / "recipes", SLUG,
                    [('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"'), *world_edits(world)],
                    "live_cli")
        recipe = str(Path(tmp) / "recipes" / SLUG)
        follower: subprocess.Popen[bytes] | None = None
        sparktui = [sys.executable, "-m", "sparktui"]
        where = ["--cluster", str(tb.cluster_file)]
        try:
            timed([*sparktui, "up", recipe, *where, "--wait"], env)
            runs = Path(tmp) / "state" / "sparktui" / "runs"
            run_dir = max(runs.iterdir(), key=lambda p: p.stat().st_mtime)
            files = history(run_dir, world, args.lines)
            size = sum(p.stat().st_size for p in files)
            print(f"live_cli: {world} ranks running, {world * args.lines:,} lines of history "
                  f"({size / 1e6:.0f} MB) in {run_dir.name}", flush=True)
            if args.follower:
                follower = start_follower([*sparktui, "watch", recipe, *where], env, Path(tmp))
            logs = [*sparktui, "logs", recipe, *where, "--grep", args.pattern]
            grep = ["grep", "-hE", args.pattern, *map(str, files)]
            status = [*sparktui, "status", recipe, *where]
            took: dict[str, list[float]] = {"logs": [], "grep": [], "status": [], "python": [],
                                            "base logs": [], "base status": []}
            base = args.baseline.resolve() if args.baseline else None
            theirs_env = {**env, "PYTHONPATH": str(base)} if base else env
            same = True
            for i in range(args.repeat + 1):
                t_grep, out_grep = timed(grep, env)
                t_logs, out_logs = timed(logs, env)
                t_status, _ = timed(status, env)
                t_py, _ = timed([sys.executable, "-c", "pass"], env)
                if base is not None:
                    other = [str(base / ".venv" / "bin" / "python"), "-m", "sparktui"]
                    t_base_logs, _ = timed([*other, *logs[3:]], theirs_env, base)
                    t_base_status, _ = timed([*other, *status[3:]], theirs_env, base)
                if i == 0:  # the warm-up: the same lines (those of the history, which is still)
                    ours, theirs = texts(out_logs, b" "), texts(out_grep, b"\t")
                    same = all(ours[k] >= n for k, n in theirs.items())
                    print(f"live_cli: {sum(theirs.values()):,} matching lines; the same from "
                          f"sparktui: {'yes' if same else 'NO'}", flush=True)
                    continue
                for key, t in (("logs", t_logs), ("grep", t_grep), ("status", t_status),
                               ("python", t_py)):
                    took[key].append(t)
                if base is not None:
                    took["base logs"].append(t_base_logs)
                    took["base status"].append(t_base_status)
            timing = Path(tmp) / "timing.log"
            logs_marks = phases(logs, env, timing)
            status_marks = phases(status, env, timing)
        finally:
            if follower is not None:
                follower.terminate()
                follower.wait(30)
            subprocess.run([*sparktui, "down", recipe, *where], env=env, cwd=ROOT,
                           capture_output=True, check=False, timeout=180)

    m = {k: statistics.median(v) for k, v in took.items() if v}

    def spread(key: str) -> str:
        return f"median {m[key]:.3f} s ({min(took[key]):.3f}-{max(took[key]):.3f})"

    budget = LOGS_RATIO * m["grep"] + LOGS_PLUS_S
    print(f"\nlive_cli: {world} ranks running on the test cluster, {world * args.lines:,} lines, "
          f"{args.repeat} runs each after a warm-up"
          + (", a sparktui watch following the run" if args.follower else ", nothing following"))
    print(f"  grep -hE over the files:  {spread('grep')}")
    print(f"  sparktui logs --grep:     {spread('logs')}  {m['logs'] / m['grep']:.2f}x grep; target "
          f"<= {LOGS_RATIO:g}x + {LOGS_PLUS_S:g} s = {budget:.3f} s: "
          f"{'met' if m['logs'] <= budget and same else 'MISSED'}")
    ok &= m["logs"] <= budget and same
    target = STATUS_TARGET_S.get(world)
    verdict = (f"target <= {target:g} s: {'met' if m['status'] <= target else 'MISSED'}"
               if target else "no target at this size")
    print(f"  sparktui status:          {spread('status')}  {verdict}")
    ok &= target is None or m["status"] <= target
    print(f"  python -c pass:           {spread('python')}")
    if args.baseline:
        print(f"  {args.baseline}: logs --grep {spread('base logs')}, status {spread('base status')} "
              f"(this checkout: {m['logs'] / m['base logs']:.2f}x and "
              f"{m['status'] / m['base status']:.2f}x of it)")
    show_phases("logs --grep", logs_marks)
    show_phases("status", status_marks)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
