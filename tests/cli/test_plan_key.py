"""The plan is built in one place (``config.cluster_plan``) with one rule for the cluster's
plan key: the CLI and the console put the same hash on a container's label, and a key that
cannot be used is an error naming it for both (the console's used to leave secrets out of the
hash, so the CLI's containers showed as changed in the console)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.catalog import load_catalog
from sparktui.cli import main
from sparktui.config import cluster_plan, state_dir
from sparktui.core.errors import SetupError
from sparktui.core.recipe import load_recipe
from sparktui.ui.session import Session
from tests.conftest import CLUSTER4, RECIPES, SEED


def bad_key() -> Path:
    key = state_dir() / "keys" / "sparks.key"
    key.parent.mkdir(parents=True, mode=0o700)
    key.write_bytes(b"short")
    key.chmod(0o600)
    return key


def test_the_cli_and_the_console_hash_a_plan_alike(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SEED), "--cluster", str(CLUSTER4), "--json"]) == 0
    cli_hash = json.loads(capsys.readouterr().out)["plan_hash"]
    info = next(i for i in load_catalog([RECIPES], CLUSTER4) if i.slug == "dsv41-flash-4x-mia")
    session = Session(info, state_dir(), bridge=None)  # type: ignore[arg-type]  # nothing is emitted
    assert session.plan.plan_hash == cli_hash
    recipe, cluster = info.recipe, info.cluster
    assert recipe is not None and cluster is not None
    assert cluster_plan(load_recipe(SEED), cluster).plan_hash == cli_hash


def test_a_key_that_cannot_be_used_stops_the_cli_and_the_console(
        capsys: pytest.CaptureFixture[str]) -> None:
    key = bad_key()
    assert main(["plan", str(SEED), "--cluster", str(CLUSTER4)]) == 2
    said = capsys.readouterr().err
    assert "cannot use the plan key of cluster 'sparks'" in said and "not a sparktui key" in said
    assert str(key) in said.replace("\n", "")
    info = next(i for i in load_catalog([RECIPES], CLUSTER4) if i.slug == "dsv41-flash-4x-mia")
    with pytest.raises(SetupError, match="cannot use the plan key of cluster 'sparks'"):
        Session(info, state_dir(), bridge=None)  # type: ignore[arg-type]
