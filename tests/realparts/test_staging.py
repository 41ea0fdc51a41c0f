"""Staging on the real 4-node test cluster: the agent copied over SFTP, run by each node's
python3 over SSH, all nodes at once, each writing its own node-local dst."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from sparktui.backend.events import Event, StagingProgress
from sparktui.backend.orchestrator import Orchestrator
from sparktui.core.cluster import load_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe_text
from tests.conftest import SEED
from tests.staging.ckpt import make_checkpoint

pytestmark = pytest.mark.realparts


async def test_seed_recipe_stages_on_every_node_at_once(testbed: Any, tmp_path: Path) -> None:
    homes = [Path(n.home) for n in testbed.nodes]
    ckpts = []
    for home in homes:
        shutil.rmtree(home / "hf", ignore_errors=True)
        shutil.rmtree(home / "kilork", ignore_errors=True)
        ckpts.append(make_checkpoint(home / "hf", rows=(4001, 4003), cols=2048, scale_cols=4))
    # the operator's recipe; only min_free shrinks so the test does not depend on this disk
    text = SEED.read_text().replace('min_free = "55G"', 'min_free = "64M"')
    recipe = load_recipe_text(text, tmp_path / "dsv41-flash-4x-mia" / "recipe.toml")
    cluster = load_cluster(Path(testbed.cluster_file))
    events: list[Event] = []
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path / "state",
                        on_event=events.append)
    try:
        results = await orch.stage()
        again = await orch.stage()
    finally:
        await orch.close()
    assert [r.node for r in results] == ["node0", "node1", "node2", "node3"]
    assert all(r.ok for r in results), [r.error for r in results]
    progress = [e for e in events if isinstance(e, StagingProgress)]
    assert {e.node for e in progress if e.phase == "pack" and e.bytes_done > 0} == {
        "node0", "node1", "node2", "node3"}
    # all at once: every node had started before any finished its first run
    first_done = next(i for i, e in enumerate(progress) if e.phase == "done")
    assert {e.node for e in progress[:first_done] if e.phase == "start"} == {
        "node0", "node1", "node2", "node3"}
    for index, home in enumerate(homes):
        dst = home / "kilork" / "mia-state" / "engram"
        names = sorted(p.name for p in dst.iterdir())
        assert names == [f".sparktui-ledger-r{index}of4.json", f"engram-l1-r{index}of4.bin",
                         f"engram-l14-r{index}of4.bin"]
        for layer in (1, 14):
            got = (dst / f"engram-l{layer}-r{index}of4.bin").read_bytes()
            assert got == ckpts[index].expected(layer, index, 4)
    assert all(r.ok and r.bytes_written == 0 for r in again)
    assert {f["status"] for r in again for f in r.files} == {"verified"}
