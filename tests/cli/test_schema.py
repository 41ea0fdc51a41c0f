"""`sparktui schema`: the recipe format for editors, generated from the models."""

from __future__ import annotations

import json

import pytest

from sparktui.cli import main
from tests.conftest import ROOT, SEED

try:
    import tomllib
except ImportError:  # pragma: no cover
    import tomli as tomllib


def test_schema_covers_every_seed_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    seed = tomllib.loads(SEED.read_text())
    assert set(seed) <= set(schema["properties"])
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"engine", "docker_image", "model", "required_nodes",
                                       "tensor_parallel_size"}
    staging = schema["$defs"]["StagingJob"]["properties"]
    assert staging["min_free"]["pattern"]
    assert schema["properties"]["engine"]["enum"] == ["sglang", "vllm"]


def test_committed_schema_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    """The file editors point at (see .taplo.toml) must match the models."""
    assert main(["schema"]) == 0
    generated = json.loads(capsys.readouterr().out)
    committed = json.loads((ROOT / "sparktui" / "schema" / "recipe.schema.json").read_text())
    assert committed == generated, "run: sparktui schema > sparktui/schema/recipe.schema.json"
