"""Two operators, one cluster, the same recipe: each acts only on their own ranks. The second is
told whose run is there and since when, ``up`` does not start over it, ``down`` and ``restart``
leave it alone, and ``--adopt`` takes it over.

Two cluster files that differ only in ``owner`` stand for the two operators (the same state
folder: one machine, as on a shared jump host). Real demo ranks on the local cluster (fixed
ports: run it in a private network namespace).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import RECIPES
from tests.runner import Cli, sparktui_cli, state_env

SINCE = r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def cluster_file(folder: Path, owner: str) -> Path:
    nodes = "".join(f'[[nodes]]\nname = "local{i}"\nhost = "localhost"\nfabric_ip = "127.0.0.1"\n'
                    f"port_offset = {i}\n" for i in range(4))
    path = folder / f"{owner.split('@')[0]}.toml"
    path.write_text(f'name = "shared"\nkind = "local"\nowner = "{owner}"\n'
                    f'hf_cache = "{folder / "hf"}"\n{nodes}')
    return path


@pytest.fixture
def as_owner(tmp_path: Path) -> Iterator[Callable[[str], Cli]]:
    env = {**state_env(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "COLUMNS": "400"}
    files = {owner: cluster_file(tmp_path, owner) for owner in ("alice@jump", "bob@jump")}

    def make(owner: str) -> Cli:
        return sparktui_cli(str(files[owner]), env, RECIPES / "demo-tp4", timeout=120)

    yield make
    for owner in files:
        make(owner)("down", "--adopt")


def states(cli: Cli) -> list[str]:
    return [r["state"] for r in json.loads(cli("status", "--json").stdout)["ranks"]]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_second_operator_leaves_the_first_ones_run_alone_until_adopt(
        as_owner: Callable[[str], Cli], tmp_path: Path) -> None:
    alice, bob = as_owner("alice@jump"), as_owner("bob@jump")
    up = alice("up", "--wait")
    assert up.returncode == 0, up.stderr
    first = json.loads(alice("status", "--json").stdout)
    ids = [r["container_id"] for r in first["ranks"]]
    assert first["owner"] == "alice@jump" and first["held"] == [] and all(ids)

    # bob's up is told whose run is there and since when, and starts nothing
    again = bob("up", "--wait")
    assert again.returncode == 1, again.stderr
    said = flat(again.stderr)
    assert re.search(rf"error: demo-tp4 is already on cluster shared, started by alice@jump {SINCE} "
                     r"\(ranks 0, 1, 2, 3, running\)\. It is not yours \(you are bob@jump\), so "
                     r"nothing was started: sparktui up demo-tp4 --adopt takes it over", said), said
    assert len(list((tmp_path / "state" / "sparktui" / "local").glob("local-*"))) == 4

    # bob's status shows them as alice's; his ranks have nothing
    status = bob("status")
    assert re.search(rf"not yours: alice@jump {SINCE} \(ranks 0, 1, 2, 3, running\); --adopt takes "
                     "them over", flat(status.stdout)), status.stdout
    assert "held by alice@jump since " in status.stdout
    seen = json.loads(bob("status", "--json").stdout)
    assert [r["state"] for r in seen["ranks"]] == ["pending"] * 4
    assert [(h["rank"], h["owner"], h["container_id"], h["status"]) for h in seen["held"]] == [
        (r, "alice@jump", ids[r], "running") for r in range(4)]

    # bob's down and restart leave them running
    down = bob("down")
    assert down.returncode == 0, down.stderr
    assert "sparktui leaves them alone; --adopt (on up, restart or down) takes them over" in flat(down.stderr)
    restart = bob("restart", "--group")
    assert restart.returncode == 1 and "has a container of yours (containers of alice@jump since " \
        in flat(restart.stderr), restart.stderr
    assert states(alice) == ["ready"] * 4
    assert [r["container_id"] for r in json.loads(alice("status", "--json").stdout)["ranks"]] == ids

    # --adopt takes them over: reattached, nothing relaunched; from then on they are bob's
    adopt = bob("up", "--adopt", "--wait")
    assert adopt.returncode == 0, adopt.stderr
    assert "rank 0 (local0): took over container sparktui-demo-tp4-r0 of alice@jump" in adopt.stderr
    assert "already running: reattached, nothing relaunched" in adopt.stderr
    mine = json.loads(bob("status", "--json").stdout)
    assert [r["container_id"] for r in mine["ranks"]] == ids and mine["held"] == []
    assert [r["state"] for r in mine["ranks"]] == ["ready"] * 4
    down = bob("down")  # no --adopt needed any more
    assert down.returncode == 0, down.stderr
    assert states(alice) == ["pending"] * 4
    assert not list((tmp_path / "state" / "sparktui" / "local").glob("local-*"))


def test_down_and_restart_with_adopt(as_owner: Callable[[str], Cli]) -> None:
    alice, bob = as_owner("alice@jump"), as_owner("bob@jump")
    assert alice("up", "--wait").returncode == 0
    old = [r["container_id"] for r in json.loads(alice("status", "--json").stdout)["ranks"]]
    # a restart with --adopt replaces them with bob's own: alice now sees bob's run
    restart = bob("restart", "--group", "--adopt", "--wait")
    assert restart.returncode == 0, restart.stderr
    mine = json.loads(bob("status", "--json").stdout)
    new = [r["container_id"] for r in mine["ranks"]]
    assert not set(new) & set(old) and mine["held"] == []
    theirs = json.loads(alice("status", "--json").stdout)
    assert [(h["owner"], h["container_id"]) for h in theirs["held"]] == [("bob@jump", c) for c in new]
    # and alice's down --adopt removes bob's
    down = alice("down", "--adopt")
    assert down.returncode == 0, down.stderr
    assert states(bob) == ["pending"] * 4 and json.loads(bob("status", "--json").stdout)["held"] == []
