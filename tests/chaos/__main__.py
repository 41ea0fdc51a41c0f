"""``python -m tests.chaos [--minutes M] [--seeds A-B] [--faults N] [--long] [--kinds K,...]
[--console] [--slurm]``:
a soak by hand, as root, on the test cluster (brought up if need be), one seed after another;
each seed's summary, and the first violation with its seed and fault sequence (exit 1)."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import sparktui_testbed as tbm
from tests.chaos.soak import Soak, Violation


def seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.chaos")
    ap.add_argument("--minutes", type=float, default=4.0, help="each seed's time (default 4)")
    ap.add_argument("--seeds", type=seeds, default=[1], help="a seed or a range A-B (default 1)")
    ap.add_argument("--faults", type=int, default=10_000, help="each seed's faults at most")
    ap.add_argument("--long", action="store_true", help="the long holds (net cuts to 40 s)")
    ap.add_argument("--kinds", default="", help="only these fault kinds, comma separated")
    ap.add_argument("--console", action="store_true",
                    help="the console follows the run (not sparktui watch); its truth timed too")
    ap.add_argument("--check-odds", type=float, default=0.5,
                    help="how often a fault is followed by the checkers at once (CI: 0.35)")
    ap.add_argument("--slurm", action="store_true",
                    help="the run on the Slurm runtime (its table: slurmd-kill and node-down join)")
    ap.add_argument("--keep", action="store_true", help="keep each seed's files (the watch's words)")
    args = ap.parse_args(argv)
    tb = tbm.up(4)
    kinds = [k for k in args.kinds.split(",") if k] or None
    total = []
    for seed in args.seeds:
        tmp = tempfile.mkdtemp(prefix=f"chaos-{seed}-")
        soak = Soak(tb, Path(tmp), seed, faults=args.faults, seconds=args.minutes * 60,
                    kinds=kinds, long=args.long, log=lambda m: print(m, flush=True),
                    follower="console" if args.console else "watch", check_odds=args.check_odds,
                    runtime="slurm" if args.slurm else "ssh")
        try:
            report = soak.run()
        except Violation as exc:
            print(f"VIOLATION\n{exc}\n(the soak's files: {tmp})", flush=True)
            return 1
        if args.keep:
            print(f"(the soak's files: {tmp})", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        print(report.summary(), flush=True)
        total.append(report)
    faults = sum(len(r.faults) for r in total)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {len(total)} seeds, {faults} "
          f"faults, {sum(r.lines_checked for r in total):,} lines checked, no violation; the "
          f"truth shown within {max(r.worst_truth_s for r in total):.1f} s by status"
          + (f", {max(r.worst_console_s for r in total):.1f} s by the console" if args.console
             else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
