"""Containers belong to their operator, on the real 4-node test cluster: two operators (two
cluster files that differ only in ``owner``) launch the same recipe one after the other; the
second is told whose run is there, its ``down`` leaves that run running, and ``--adopt`` takes
it over. A container sparktui did not make that holds a rank's name is named, never removed.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.conftest import RECIPES
from tests.realparts.conftest import IMAGE
from tests.runner import Cli, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

SLUG = "demo-owners"
SINCE = r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def clients(testbed: Any) -> list[docker.DockerClient]:
    return [docker.DockerClient(base_url=f"unix://{n.docker_socket}") for n in testbed.nodes]


def on_nodes(testbed: Any) -> dict[int, list[Any]]:
    """Per node, this recipe's containers as that node's engine lists them."""
    return {i: c.containers.list(all=True, filters={"label": f"sparktui.recipe={SLUG}"})
            for i, c in enumerate(clients(testbed))}


@pytest.fixture(scope="module")
def as_owner(testbed: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Cli]]:
    tmp = tmp_path_factory.mktemp("owners")
    shutil.copytree(RECIPES / "demo-tp4", tmp / SLUG)
    base = Path(testbed.cluster_file).read_text()
    assert '\nname = "testbed"\n' in base
    files = {}
    for owner in ("alice@jump", "bob@jump"):
        files[owner] = tmp / f"{owner.split('@')[0]}.toml"
        files[owner].write_text(base.replace('\nname = "testbed"\n',
                                             f'\nname = "testbed"\nowner = "{owner}"\n'))
    env = {**state_env(tmp / "state"), "XDG_CONFIG_HOME": str(tmp / "config"), "COLUMNS": "400"}

    def make(owner: str) -> Cli:
        return sparktui_cli(str(files[owner]), env, tmp / SLUG)

    yield make
    make("alice@jump")("down", "--adopt")


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_second_operator_is_told_and_leaves_the_first_ones_run(
        as_owner: Callable[[str], Cli], testbed: Any) -> None:
    alice, bob = as_owner("alice@jump"), as_owner("bob@jump")
    up = alice("up", "--wait")
    assert up.returncode == 0, up.stderr
    first = on_nodes(testbed)
    for i, cs in first.items():
        assert [(c.status, c.labels["sparktui.owner"], c.labels["sparktui.rank"]) for c in cs] == [
            ("running", "alice@jump", str(i))]
    ids = {i: cs[0].id for i, cs in first.items()}

    again = bob("up", "--wait")
    assert again.returncode == 1, again.stderr
    assert re.search(rf"error: {SLUG} is already on cluster testbed, started by alice@jump {SINCE} "
                     r"\(ranks 0, 1, 2, 3, running\)\. It is not yours \(you are bob@jump\), so "
                     rf"nothing was started: sparktui up {SLUG} --adopt takes it over",
                     flat(again.stderr)), again.stderr
    status = json.loads(bob("status", "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["pending"] * 4
    assert [(h["node"], h["owner"], h["container_id"]) for h in status["held"]] == [
        (f"node{i}", "alice@jump", ids[i]) for i in range(4)]

    down = bob("down")
    assert down.returncode == 0, down.stderr
    assert "has containers of another owner: alice@jump since" in flat(down.stderr), down.stderr
    after = on_nodes(testbed)
    assert {i: [(c.id, c.status) for c in cs] for i, cs in after.items()} == {
        i: [(ids[i], "running")] for i in range(4)}
    assert [r["state"] for r in json.loads(alice("status", "--json").stdout)["ranks"]] == ["ready"] * 4

    adopt = bob("up", "--adopt", "--wait")
    assert adopt.returncode == 0, adopt.stderr
    assert "took over container sparktui-demo-owners-r3 of alice@jump" in adopt.stderr
    assert {i: cs[0].id for i, cs in on_nodes(testbed).items()} == ids  # nothing relaunched
    down = bob("down")  # his now: no --adopt needed
    assert down.returncode == 0, down.stderr
    assert on_nodes(testbed) == {i: [] for i in range(4)}


def test_a_name_held_by_a_container_sparktui_did_not_make_is_an_error(
        as_owner: Callable[[str], Cli], testbed: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    node1 = clients(testbed)[1]
    planted = node1.containers.run(IMAGE, ["sh", "-c", f"echo {tag}; sleep 600"], detach=True,
                                   name=f"sparktui-{SLUG}-r1", init=True, network_mode="none")
    try:
        up = as_owner("alice@jump")("up", "--wait")
        assert up.returncode == 1, up.stderr
        said = flat(up.stderr)
        assert (f"error: container sparktui-{SLUG}-r1 on node node1 ({planted.id[:12]}, running) was "
                "not made by sparktui (it has no sparktui labels), and it holds the name this rank "
                "needs: it was left as it is; rename or remove it on node1 (docker rename / docker "
                "rm), then try again; nothing was started") in said, said
        planted.reload()
        assert planted.status == "running" and planted.logs().decode().strip() == tag
        assert on_nodes(testbed) == {i: [] for i in range(4)}  # no rank of it started anywhere
    finally:
        planted.remove(force=True)
