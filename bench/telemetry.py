"""CPU cost of node telemetry in the sparktui process: N nodes (8 by default) sampled every 2 s
over SSH.

The real 4-node test cluster (sparktui_testbed; root) serves the N sampled nodes: each test
node appears N/4 times in the cluster file, so there are N SSH connections and N commands every
2 s. Prints the sparktui process's CPU time over the window as a percentage of one core
(target: under 2 %) and per node (issue 30: flat as the cluster grows; ``--nodes 8,32`` measures
each size in turn and prints the ratio of the per-node costs). `--local` samples N local nodes
instead (a subprocess each time; child CPU is counted too).

``--group`` measures a running group instead: a test cluster of N real nodes (one sshd and
dockerd each, rebuilt for the size), the demo recipe launched with a rank a node by one
Orchestrator and, once ready, attached by a second one, as ``up --wait`` and then the console or
``watch`` do. Four windows of the watching process: telemetry and the health probes (the node
sampler every 2 s, every ready rank's health probe at the health interval), no log followed;
then also every ready rank's engine process watch (``docker top`` at the health interval) and
the head's metrics scrape; then everything a watching process runs
(also every rank's log followed and its boot checks fed, the memory guard); then, after
``down``, the same process connected and sampling nothing (its idle SSH connections).

    python bench/telemetry.py [--seconds 30] [--local] [--nodes 8[,32]] [--group]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sparktui_testbed  # noqa: E402
from bench.demo_run import demo_recipe, world_edits  # noqa: E402
from sparktui.backend.events import Event, NodeTelemetry  # noqa: E402
from sparktui.backend.orchestrator import Orchestrator  # noqa: E402
from sparktui.core.cluster import load_cluster_text, local_cluster  # noqa: E402
from sparktui.core.plan import build_plan  # noqa: E402
from sparktui.core.recipe import load_recipe  # noqa: E402


def testbed_cluster_text(count: int) -> str:
    tb = sparktui_testbed.up(4)
    head = Path(tb.cluster_file).read_text().split("[[nodes]]")[0]
    nodes = "".join(f'[[nodes]]\nname = "n{i}"\nhost = "{tb.nodes[i % len(tb.nodes)].ip}"\n'
                    for i in range(count))
    return head + nodes


def cpu() -> tuple[float, float]:
    """(this process and its reaped children, the long-lived sampling shells with everything
    they ran). On the test cluster and the local cluster both run on this machine; on a real
    cluster the second is spread over the nodes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"sparktui-end" not in (proc / "cmdline").read_bytes():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return mine, total


async def measure(local: bool, seconds: float, count: int) -> float:
    """The sparktui process's CPU per node, as a percentage of one core."""
    recipe = load_recipe(ROOT / "recipes" / "demo-tp4" / "recipe.toml")
    cluster = local_cluster(count) if local else load_cluster_text(testbed_cluster_text(count))
    recipe_spec = recipe.spec.model_copy(update={"required_nodes": count,
                                                 "tensor_parallel_size": count})
    recipe8 = type(recipe)(spec=recipe_spec, source=recipe.source, slug=recipe.slug)
    samples = 0

    def counted(event: Event) -> None:
        nonlocal samples
        if isinstance(event, NodeTelemetry) and event.status == "ok":
            samples += 1

    with tempfile.TemporaryDirectory() as tmp:
        orch = Orchestrator(recipe8, cluster, build_plan(recipe8, cluster), state_root=Path(tmp),
                            on_event=counted)
        await orch.connect()
        sampler = orch.telemetry(interval=2.0)
        sampler.start()
        await asyncio.sleep(4)  # connections open, first samples in
        c0, t0, s0 = cpu(), time.monotonic(), samples
        await asyncio.sleep(seconds)
        c1, t1, s1 = cpu(), time.monotonic(), samples
        await orch.close()
    span, n = t1 - t0, max(1, s1 - s0)
    own, nodes = c1[0] - c0[0], c1[1] - c0[1]
    where = (f"{count} local nodes" if local else
             f"{count} nodes over SSH (4 test nodes, {count / 4:g} connections each)")
    print(f"telemetry, {where}, every 2 s, {span:.0f} s window: {s1 - s0} samples")
    print(f"  sparktui process: {100 * own / span:.2f} % of one core ({1000 * own / n:.2f} ms per sample,"
          f" {100 * own / span / count:.3f} % per node)   target < 2 %: "
          f"{'met' if 100 * own / span < 2 else 'MISSED'}")
    print(f"  sampling commands on the nodes: {100 * nodes / span:.2f} % of one core in all "
          f"({100 * nodes / span / count:.2f} % per node)")
    print(f"  both together: {100 * (own + nodes) / span:.2f} % of one core")
    return 100 * own / span / count


class Windows:
    """CPU windows of this process, each ``seconds`` long, each profiled to ``profile.<name>``
    when asked."""

    def __init__(self, seconds: float, profile: str | None) -> None:
        self.seconds = seconds
        self.profile = profile
        self.cpu: dict[str, float] = {}  # name -> % of one core

    async def measure(self, name: str, seconds: float | None = None) -> float:
        prof = cProfile.Profile() if self.profile else None
        c0, t0 = cpu()[0], time.monotonic()
        if prof is not None:
            prof.enable()
        await asyncio.sleep(seconds or self.seconds)
        if prof is not None:
            prof.disable()
            prof.dump_stats(f"{self.profile}.{name}")
        self.cpu[name] = 100 * (cpu()[0] - c0) / (time.monotonic() - t0)
        return self.cpu[name]


async def measure_group(seconds: float, count: int, profile: str | None = None) -> float:
    """The watching process's CPU per node, as a percentage of one core, with a group of
    ``count`` ranks running on ``count`` test nodes: telemetry and the probes alone, then
    everything a watching process runs."""
    tb = sparktui_testbed.up(count)
    cluster = load_cluster_text(Path(tb.cluster_file).read_text())
    samples = 0
    windows = Windows(seconds, profile)

    def counted(event: Event) -> None:
        nonlocal samples
        if isinstance(event, NodeTelemetry) and event.status == "ok":
            samples += 1

    with tempfile.TemporaryDirectory() as tmp:
        folder = demo_recipe(Path(tmp) / "recipes", "bench-watch", world_edits(count), "telemetry")
        recipe = load_recipe(folder / "bench-watch" / "recipe.toml")
        plan = build_plan(recipe, cluster)
        launcher = Orchestrator(recipe, cluster, plan, state_root=Path(tmp) / "state")
        try:  # launched by one process, watched by another, as `up --wait` then the console
            await launcher.connect()
            await launcher.up()
            if not await launcher.wait(timeout=180):
                raise SystemExit(f"telemetry: the {count}-rank group was not ready: "
                                 f"{[(r.rank, r.state) for r in launcher.ranks]}")
        finally:
            await launcher.close()
        orch = Orchestrator(recipe, cluster, plan, state_root=Path(tmp) / "state", on_event=counted)
        try:
            await orch.connect()
            await orch.attach(follow=False)
            await orch.catch_up()
            sampler = orch.telemetry(interval=2.0)
            sampler.start()
            loops = [asyncio.create_task(orch.health.loop())]
            await asyncio.sleep(12)  # a health interval: every ready rank probed once more
            ready = sum(1 for r in orch.ranks if r.state == "ready")
            if os.environ.get("TELEMETRY_BENCH_DEBUG"):
                print([(r.rank, r.state, r.health) for r in orch.ranks], flush=True)
            s0 = samples
            await windows.measure(f"{count}.health")
            taken = samples - s0
            probed = sum(1 for r in orch.ranks if orch.health.probed(r))
            loops += [asyncio.create_task(job()) for job in (
                orch.metrics.loop, *([orch.engines.loop] if orch.engines else []))]
            await asyncio.sleep(12)
            await windows.measure(f"{count}.probes")
            scraped = len(orch.metrics.ranks)
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            orch.start_following()  # the same loops again, with every rank's log and the memory guard
            await asyncio.sleep(12)
            await windows.measure(f"{count}.watch")
            await sampler.stop()
            await orch.down()
            await asyncio.sleep(2)
            await windows.measure(f"{count}.idle", min(seconds, 20))
        finally:
            await orch.close()
    health, probes, watch, idle = (windows.cpu[f"{count}.{w}"]
                                   for w in ("health", "probes", "watch", "idle"))
    print(f"a running {count}-rank group on {count} test nodes ({ready} ready), {seconds:.0f} s "
          f"windows: {taken} node samples (every 2 s), {probed} ranks probed for health and their "
          f"engines watched, {scraped} scraped for metrics")
    print(f"  telemetry and the health probes: {health:.2f} % of one core ({health / count:.3f} % "
          f"per node)   target < 2 %: {'met' if health < 2 else 'MISSED'}")
    print(f"  and the engines' process watch and the metrics scrape: {probes:.2f} % of one core "
          f"({probes / count:.3f} % per node)")
    print(f"  everything a watching process runs (also every rank's log followed, the boot "
          f"checks, the memory guard): {watch:.2f} % of one core ({watch / count:.3f} % per node)")
    print(f"  baseline, the same process after down (connected, sampling nothing): "
          f"{idle:.2f} % of one core")
    return health / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--local", action="store_true")
    ap.add_argument("--nodes", default="8", metavar="N[,N...]",
                    help="sampled nodes (default 8); several sizes: each in turn, then the ratio")
    ap.add_argument("--group", action="store_true",
                    help="a running demo group on a test cluster of each size, followed as watch does")
    ap.add_argument("--profile", metavar="FILE",
                    help="with --group: a cProfile of each window to FILE.<nodes>.<window>")
    args = ap.parse_args()
    counts = [int(n) for n in args.nodes.split(",")]
    per_node = [asyncio.run(measure_group(args.seconds, n, args.profile) if args.group else
                            measure(args.local, args.seconds, n)) for n in counts]
    if len(counts) > 1:
        print(f"per node at {counts[-1]} nodes: {per_node[-1] / per_node[0]:.2f}x the cost at "
              f"{counts[0]} ({per_node[0]:.3f} -> {per_node[-1]:.3f} % of one core a node)")


if __name__ == "__main__":
    main()
