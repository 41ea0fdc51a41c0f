"""Owners: the operator's default name, the cluster file's ``owner``, the label on every planned
container (outside the plan hash), and the takeovers an operator recorded."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from sparktui.core.cluster import load_cluster_text, local_cluster
from sparktui.core.errors import ClusterError
from sparktui.core.ownership import (
    LABEL_OWNER,
    OWNER_PATTERN,
    Adoptions,
    default_owner,
    owner_name,
    when_text,
)
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import CLUSTER4, RECIPES

LOCAL = 'name = "shared"\nkind = "local"\n{owner}[[nodes]]\nname = "a"\nhost = "localhost"\n'


def test_the_default_owner_is_user_at_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = default_owner()
    assert re.fullmatch(OWNER_PATTERN, owner) and "@" in owner
    monkeypatch.setenv("USER", "a user/with:odd chars")
    monkeypatch.setenv("LOGNAME", "a user/with:odd chars")
    assert default_owner().startswith("a_user_with_odd_chars@")
    assert local_cluster(2).owner == default_owner()


def test_the_cluster_file_sets_the_owner_or_says_what_is_wrong() -> None:
    assert load_cluster_text(LOCAL.format(owner='owner = "alice@jump"\n')).owner == "alice@jump"
    assert load_cluster_text(LOCAL.format(owner="")).owner == default_owner()
    for bad in ("alice jump", "-x", "a\\u001b[31m", ""):
        with pytest.raises(ClusterError) as err:
            load_cluster_text(LOCAL.format(owner=f'owner = "{bad}"\n'))
        [problem] = err.value.problems
        assert problem.key == "owner" and problem.line == 3
        assert "is no owner name: write letters, digits and . _ @ + -" in problem.message
    with pytest.raises(ClusterError, match="at most 128"):
        load_cluster_text(LOCAL.format(owner=f'owner = "{"a" * 129}"\n'))


def test_every_container_carries_its_owner_and_the_hash_does_not() -> None:
    recipe = load_recipe(RECIPES / "demo-tp4" / "recipe.toml")
    text = (CLUSTER4).read_text()
    plans = [build_plan(recipe, load_cluster_text(text.replace('owner = "kilork@laptop"', f'owner = "{o}"')))
             for o in ("alice@jump", "bob@jump")]
    assert [r.container.labels[LABEL_OWNER] for r in plans[0].ranks] == ["alice@jump"] * 4
    assert [r.container.labels[LABEL_OWNER] for r in plans[1].ranks] == ["bob@jump"] * 4
    assert plans[0].plan_hash == plans[1].plan_hash  # who starts it does not change what runs
    assert "--label sparktui.owner=alice@jump" in plans[0].ranks[0].docker_run()


def test_adoptions_are_recorded_privately_and_forgotten(tmp_path: Path) -> None:
    store = Adoptions(tmp_path / "state")
    assert store.load() == {} and store.adopted_by("bob@jump") == set()
    store.add("c1", "alice@jump", "bob@jump")
    store.add("c2", None, "bob@jump")
    store.add("c3", "bob@jump", "carol@jump")
    assert store.adopted_by("bob@jump") == {"c1", "c2"}
    assert store.load()["c2"]["owner"] is None and store.load()["c1"]["at"].endswith("Z")
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    store.forget(["c1", "gone"])
    assert store.adopted_by("bob@jump") == {"c2"} and store.adopted_by("carol@jump") == {"c3"}
    store.path.write_text("[not a mapping")
    assert store.load() == {}  # a broken file asks for --adopt again, never a crash
    store.add("c4", "alice@jump", "bob@jump")
    assert store.adopted_by("bob@jump") == {"c4"}


def test_owners_and_times_in_sentences() -> None:
    assert owner_name("alice@jump") == "alice@jump"
    assert owner_name(None) == "an older sparktui (no owner label)"
    assert when_text("2026-05-01T12:00:03.123456789Z") == "2026-05-01 12:00:03 UTC"
    assert when_text("0001-01-01T00:00:00Z") == when_text(None) == "an unknown time"
