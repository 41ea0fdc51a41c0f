"""What keeping the status document costs a follower (issue 30): one ``StatusKeeper.keep`` a
second, for a group of ``--ranks`` ranks (the demo recipe made that wide, on as many local
nodes; nothing started: the ranks ready, their checks as they stand, a sample per node), as a
share of one core; the baseline in the same run is writing the same bytes alone
(``write_status``), so the ratio is what building the document adds to the write.

    python bench/statusdoc.py [--ranks 4,32] [--writes 300]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.demo_run import demo_recipe, world_edits  # noqa: E402


def build(folder: Path, world: int):  # type: ignore[no-untyped-def]
    """An Orchestrator of a ``world``-rank demo group whose run holds ready ranks."""
    from sparktui.backend.events import NodeTelemetry
    from sparktui.backend.orchestrator import Orchestrator
    from sparktui.config import cluster_plan
    from sparktui.core.cluster import local_cluster
    from sparktui.core.recipe import load_recipe
    from sparktui.core.telemetry import DiskSample, GpuSample, NodeSample

    slug = f"bench-doc-{world}"
    demo_recipe(folder / "recipes", slug, world_edits(world), "statusdoc")
    recipe = load_recipe(folder / "recipes" / slug / "recipe.toml")
    cluster = local_cluster(world)
    plan = cluster_plan(recipe, cluster, folder / "state")
    orch = Orchestrator(recipe, cluster, plan, state_root=folder / "state")
    run = orch.store.create(slug)
    orch.board.run = run
    for info in orch.ranks:
        info.container_id = f"{info.rank:012x}" * 2
        info.state, info.health = "ready", 200
        info.last_line, info.last_line_at = f"[TP{info.rank}] Decode batch. #running-req: 3", time.time()
    sample = NodeSample(128 * 2**30, 100 * 2**30, True, 0.5, (1, 2),
                        [GpuSample(0, "GB10", 97.0, 71.0, 95.0, None, None)],
                        [DiskSample("/srv/hf", 61 * 2**30, 900 * 2**30)])
    latest = {n: NodeTelemetry(n, "ok", sample) for n in orch.node_names()}
    orch.sampled = lambda: latest  # type: ignore[method-assign]
    return orch, run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="4,32")
    ap.add_argument("--writes", type=int, default=300)
    args = ap.parse_args()
    from sparktui.backend.statusdoc import StatusKeeper
    from sparktui.core.statusdoc import STATUS_FILE, write_status

    print(f"statusdoc: {platform.machine()}, Python {platform.python_version()}, "
          f"{args.writes} writes each")
    for world in (int(x) for x in args.ranks.split(",")):
        with tempfile.TemporaryDirectory(prefix="sparktui-statusdoc-") as tmp:
            orch, run = build(Path(tmp), world)
            keeper = StatusKeeper(orch._kept_document, print)
            keeper.keep()
            text = (run.dir / STATUS_FILE).read_text()
            keeps, writes = [], []
            for _ in range(args.writes):  # alternating: the same moment of the machine for both
                t0 = time.process_time()
                keeper.keep()
                t1 = time.process_time()
                write_status(run.dir, text)
                t2 = time.process_time()
                keeps.append(t1 - t0)
                writes.append(t2 - t1)
            keep_ms, write_ms = statistics.median(keeps) * 1e3, statistics.median(writes) * 1e3
            print(f"  {world:>3} ranks: document {len(text):,} bytes; keep {keep_ms:.2f} ms CPU "
                  f"(the write alone {write_ms:.2f} ms: {keep_ms / max(write_ms, 1e-6):.1f}x); "
                  f"once a second: {keep_ms / 10:.3f} % of a core, "
                  f"{keep_ms / 10 / world * 1000:.1f} milli-% a rank")


if __name__ == "__main__":
    main()
