"""CPU cost of the memory guard while ranks boot: 8 nodes read every second.

The guard as the Orchestrator runs it (``Orchestrator.memory``, ``backend/memguard.py``), every
rank of an 8-rank demo plan booting, so every node's reading command runs with a 1 s interval:
one long-lived ``sh`` loop per node, each reading parsed and judged in this process. By default
on 8 local nodes (this machine's shell, 8 loops); ``--testbed`` over SSH to the real 4-node
test cluster, each node twice (8 connections; root, under the test cluster's lock).

Measured, over the same window: this process's CPU time with the guard running, against a
baseline of the same process and event loop with no guard (the same run, just before); and the
node side, the 8 loops with every ``sleep`` they ran (from ``/proc``: on this machine both
sides share the CPUs; on a real cluster the node side is spread over the nodes). Budget: 2 %
of one core for the whole.

    python bench/memguard.py [--seconds 30] [--testbed]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.backend.orchestrator import Orchestrator  # noqa: E402
from sparktui.core.cluster import load_cluster_text, local_cluster  # noqa: E402
from sparktui.core.meminfo import MEM_END  # noqa: E402
from sparktui.core.plan import build_plan  # noqa: E402
from sparktui.core.recipe import load_recipe  # noqa: E402

BUDGET = 2.0  # % of one core


def own_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def loops_cpu(testbed: bool) -> dict[int, float]:
    """CPU seconds of each of this bench's reading loops alive now, with the children it reaped
    (its sleeps): on the local nodes this process's own children; on the test cluster those in
    its nodes (under an sshd: the test cluster is held under its lock, so they are this
    bench's). Other builds on this machine run the same loops: theirs are not counted."""
    found: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if MEM_END.encode() not in (proc / "cmdline").read_bytes():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            mine = under_sshd(int(fields[1])) if testbed else int(fields[1]) == os.getpid()
        except OSError:
            continue
        if mine:
            found[int(proc.name)] = sum(int(x) for x in fields[11:15]) / tick  # u s cu cs time
    return found


def under_sshd(pid: int) -> bool:
    """Whether an ancestor of ``pid`` (itself included) is an sshd."""
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat.split("(", 1)[1].rsplit(")", 1)[0] == "sshd":
            return True
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """What the loops alive over the whole window spent in it."""
    return sum(after[pid] - before[pid] for pid in before.keys() & after.keys())


def cluster_text() -> str:
    import sparktui_testbed

    tb = sparktui_testbed.up(4)
    head = Path(tb.cluster_file).read_text().split("[[nodes]]")[0]
    return head + "".join(f'[[nodes]]\nname = "n{i}"\nhost = "{n.ip}"\n'
                          for i, n in enumerate([*tb.nodes, *tb.nodes]))


async def measure(testbed: bool, seconds: float) -> None:
    recipe = load_recipe(ROOT / "recipes" / "demo-tp4" / "recipe.toml")
    cluster = load_cluster_text(cluster_text()) if testbed else local_cluster(8)
    spec = recipe.spec.model_copy(update={"required_nodes": 8, "tensor_parallel_size": 8})
    recipe8 = type(recipe)(spec=spec, source=recipe.source, slug=recipe.slug)
    with tempfile.TemporaryDirectory() as tmp:
        orch = Orchestrator(recipe8, cluster, build_plan(recipe8, cluster), state_root=Path(tmp))
        await orch.connect()
        for info in orch.ranks:  # every rank boots: a reading a second on every node
            info.move("creating")
            info.move("booting")
        c0, t0 = own_cpu(), time.monotonic()
        await asyncio.sleep(seconds)  # the baseline: this process, its loop, no guard
        base, base_span = own_cpu() - c0, time.monotonic() - t0
        guard = orch.memory
        task = asyncio.create_task(guard.loop())
        await asyncio.sleep(3)  # every loop started, first readings in
        c0, n0, r0, t0 = own_cpu(), loops_cpu(testbed), guard.readings, time.monotonic()
        await asyncio.sleep(seconds)
        c1, n1, r1, t1 = own_cpu(), loops_cpu(testbed), guard.readings, time.monotonic()
        assert len(n0.keys() & n1.keys()) == 8, (n0, n1)  # one loop per node, the whole window
        assert guard.interval == 1.0
        guard.closed = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await orch.close()
    span, n = t1 - t0, max(1, r1 - r0)
    own = (c1 - c0) - base * span / base_span
    nodes = spent(n0, n1)
    where = ("8 nodes over SSH (the 4 test nodes, 2 connections each)" if testbed
             else "8 local nodes (this machine's shell)")
    print(f"memory guard, {where}, every 1 s, {span:.0f} s window: {r1 - r0} readings "
          f"({(r1 - r0) / span:.1f}/s)")
    print(f"  sparktui process: {100 * (c1 - c0) / span:.2f} % of one core, baseline "
          f"{100 * base / base_span:.2f} %: the guard {100 * own / span:.2f} % "
          f"({1000 * own / n:.3f} ms per reading)")
    print(f"  reading loops on the nodes: {100 * nodes / span:.2f} % of one core in all "
          f"({100 * nodes / span / 8:.3f} % per node)")
    total = 100 * (own + nodes) / span
    print(f"  both: {total:.2f} % of one core; budget {BUDGET:g} %: ratio {total / BUDGET:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--testbed", action="store_true")
    args = ap.parse_args()
    asyncio.run(measure(args.testbed, args.seconds))


if __name__ == "__main__":
    main()
