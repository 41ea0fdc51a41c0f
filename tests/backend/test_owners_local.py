"""Whose ranks these are, on the local cluster with the Orchestrator itself: a rank that holds a
container name but was not made by sparktui is named and left alone (nothing starts); one made
by a sparktui before owner labels is another owner's until adopted; an own stopped one is
replaced. Real rank processes (fixed ports: run it in a private network namespace)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.owners import HeldElsewhere, NameClash
from sparktui.backend.runtimes.processes import LocalRuntime
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import build_plan
from sparktui.core.rankspec import ContainerSpec
from sparktui.core.recipe import load_recipe
from tests.conftest import RECIPES

SLEEP = ["sh", "-c", "echo planted; sleep 600"]


def planted(name: str, labels: dict[str, str]) -> ContainerSpec:
    return ContainerSpec(name=name, image="none", entrypoint=SLEEP, command=[], env={}, mounts=[],
                         shm_size=None, gpus="none", devices=[], labels=labels)


@pytest.fixture
async def orch(tmp_path: Path) -> AsyncIterator[Orchestrator]:
    recipe = load_recipe(RECIPES / "demo-tp4" / "recipe.toml")
    cluster = local_cluster(4)
    made = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path)
    await made.connect()
    yield made
    await made.close()
    rt = LocalRuntime(tmp_path / "local")
    for state in await rt.find({}):
        await rt.remove(state.id)


async def test_a_name_sparktui_did_not_make_stops_up_and_stays(orch: Orchestrator, tmp_path: Path) -> None:
    rt = LocalRuntime(tmp_path / "local")
    other = await rt.run(planted("sparktui-demo-tp4-r1", {"made.by": "someone"}), {})
    with pytest.raises(NameClash) as clash:
        await orch.up()
    assert str(clash.value) == (
        f"container sparktui-demo-tp4-r1 on node local1 ({other.id}, running) was not made by "
        "sparktui (it has no sparktui labels), and it holds the name this rank needs: it was left "
        "as it is; rename or remove it on local1 (docker rename / docker rm), then try again; "
        "nothing was started")
    assert [s.id for s in await rt.find({})] == [other.id]  # nothing else started
    assert (await rt.inspect(other.id)).running and orch.run is None


async def test_a_container_without_owner_is_held_until_adopted(orch: Orchestrator, tmp_path: Path) -> None:
    rt = LocalRuntime(tmp_path / "local")
    old = {"sparktui.recipe": "demo-tp4", "sparktui.cluster": "local", "sparktui.rank": "2"}
    older = await rt.run(planted("sparktui-demo-tp4-r2", old), {})
    assert not await orch.attach(follow=False)
    [held] = orch.held
    assert (held.rank, held.node, held.owner, held.container.id) == (2, "local2", None, older.id)
    assert orch.ranks[2].detail.startswith("held by an older sparktui (no owner label) since ")
    with pytest.raises(HeldElsewhere, match=r"started by an older sparktui \(no owner label\) since "
                                            r".* \(rank 2, running\)"):
        await orch.up()
    assert [s.id for s in await rt.find({})] == [older.id]

    # adopted, then stopped: up replaces it with a rank of the operator's own, like the others
    assert await orch.attach(follow=False, adopt=True)
    assert orch.held == [] and orch.ranks[2].container_id == older.id
    await rt.stop(older.id, timeout=5)
    await orch.up()
    try:
        ranks = {s.labels["sparktui.rank"]: s for s in await rt.find({"sparktui.recipe": "demo-tp4"})}
        assert sorted(ranks) == ["0", "1", "2", "3"] and ranks["2"].id != older.id
        assert {s.labels["sparktui.owner"] for s in ranks.values()} == {orch.owner}
        assert (await rt.inspect(older.id)).status == "missing"
        assert orch.adoptions.load() == {}  # the replaced one's takeover is forgotten
    finally:
        await orch.down()
