"""``sparktui dump`` on the real 4-node test cluster (sparktui_testbed; needs root): one rank's
dump against all four at once (issue 27, done-when 4: every rank's stacks within 1.5x of one
rank's).

Brings up demo-tp4 (ready at once) with its own state folder, follows it in this process, then
``--runs`` times: rank 0 alone (``Dumper.one``), then every rank (``Orchestrator.dump``: the
four at once); prints the medians, their ratio, the sum of the four ranks' own times (what one
after another would cost) and the machine's CPUs and load. Every node of the test cluster is
this machine: four py-spy processes and four dockerds share its CPUs, which a real cluster's
nodes do not. Run under the testbed lock:

    flock /tmp/sparktui-testbed.lock .venv/bin/python bench/dump.py [--runs 5]

``--local``: the same on the local cluster (this machine, no SSH, no Docker), where the demo
image has no py-spy: the stacks come by the engine's stack signal (SIGUSR1; what it printed is
read from the rank's log), the other path done-when 4 names. Run it in a network namespace of
its own (the ranks bind their ports on loopback):

    unshare -n sh -c 'ip link set lo up && exec .venv/bin/python bench/dump.py --local'
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # sparktui_testbed sits at the repository root, outside the wheel

import sparktui_testbed  # noqa: E402
from sparktui.backend.dumps import Dumper  # noqa: E402
from sparktui.backend.orchestrator import Orchestrator  # noqa: E402
from sparktui.core.cluster import load_cluster, local_cluster  # noqa: E402
from sparktui.core.plan import build_plan  # noqa: E402
from sparktui.core.recipe import load_recipe  # noqa: E402

TARGET_RATIO = 1.5


async def bench(runs: int, cluster_file: str | None, state: Path) -> None:
    folder = state / "bench-dump"
    folder.mkdir()
    text = (ROOT / "recipes" / "demo-tp4" / "recipe.toml").read_text()
    (folder / "recipe.toml").write_text(text.replace('"--demo-boot-seconds", "2"',
                                                     '"--demo-boot-seconds", "0"'))
    recipe = load_recipe(folder / "recipe.toml")
    cluster = load_cluster(Path(cluster_file)) if cluster_file else local_cluster(4)
    how = "py-spy" if cluster_file else "SIGUSR1"
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=state / "s")
    await orch.connect()
    try:
        await orch.up(adopt=True)
        assert await orch.wait(timeout=120), [r.detail for r in orch.ranks]
        assert orch.run is not None and orch.engines is not None
        await orch.engines.sample_all()

        async def nothing() -> None:
            return None

        ones, alls, sums = [], [], []
        for _ in range(runs):
            one = await Dumper(orch.board, orch.runtime, orch.run, nothing).one(orch.ranks[0])  # type: ignore[arg-type]
            assert one.how == how, one.note
            ones.append(one.seconds)
            every = await orch.dump()
            assert all(d.how == how for d in every.ranks), [d.note for d in every.ranks]
            alls.append(every.seconds)
            sums.append(sum(d.seconds for d in every.ranks))
        one_s, all_s, sum_s = (statistics.median(v) for v in (ones, alls, sums))
        load = os.getloadavg()[0]
        print(f"{cluster.name}, stacks by {how}")
        print(f"one rank: median {one_s:.3f} s ({', '.join(f'{v:.2f}' for v in ones)})")
        print(f"four ranks at once: median {all_s:.3f} s ({', '.join(f'{v:.2f}' for v in alls)})")
        print(f"four ranks one after another would take: median {sum_s:.3f} s")
        print(f"ratio all/one: {all_s / one_s:.2f} (target {TARGET_RATIO}); "
              f"{os.cpu_count()} CPUs, load {load:.2f}")
    finally:
        await orch.down()
        await orch.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--local", action="store_true", help="the local cluster: the stack signal path")
    args = p.parse_args()
    cluster_file = None if args.local else sparktui_testbed.up(4).cluster_file
    with tempfile.TemporaryDirectory(prefix="bench-dump-") as tmp:
        asyncio.run(bench(args.runs, cluster_file, Path(tmp)))


if __name__ == "__main__":
    main()
