"""Whatever an operator's editor produces, loading gives a recipe or the project's error."""

from __future__ import annotations

import copy
import sys
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.core.cluster import local_cluster
from sparktui.core.errors import RecipeError
from sparktui.core.lints import lint
from sparktui.core.plan import build_plan
from sparktui.core.recipe import Recipe, load_recipe_text, recipe_from_source
from sparktui.core.tomlsource import TomlSource
from tests.conftest import SEED

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SEED_TEXT = SEED.read_text()
SEED_DATA = tomllib.loads(SEED_TEXT)

Path_ = tuple[Any, ...]


def paths(data: Any, prefix: Path_ = ()) -> list[Path_]:
    out: list[Path_] = []
    if isinstance(data, dict):
        for k, v in data.items():
            out.append((*prefix, k))
            out += paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append((*prefix, i))
            out += paths(v, (*prefix, i))
    return out


ALL_PATHS = paths(SEED_DATA)

tricky_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["{{", "}}", "{{rank}}", "{{nope}}", "re:(", "re:[", "...", "55Q", "-1",
                     "1e999", "all", "any", "--port", "--model-path", "sglang", "vllm", "20x",
                     "\x00", "ℵ", "re:^x$", "{{ hf }}", "0"]),
)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), tricky_text),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(tricky_text, children, max_size=3)),
    max_leaves=6,
)


def parent_and_key(data: Any, path: Path_) -> tuple[Any, Any]:
    node = data
    for comp in path[:-1]:
        node = node[comp]
    return node, path[-1]


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(SEED_DATA)
    for _ in range(draw(st.integers(1, 4))):
        live = paths(data)
        if not live:
            break
        path = draw(st.sampled_from(live))
        parent, key = parent_and_key(data, path)
        action = draw(st.sampled_from(["drop", "retype", "rename", "string"]))
        if action == "drop":
            del parent[key]
        elif action == "retype":
            parent[key] = draw(values)
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(tricky_text)] = parent.pop(key)
        elif action == "string":
            parent[key] = draw(tricky_text)
    return data


def check(recipe: Recipe) -> None:
    """A recipe that loads must also lint and plan without surprises."""
    found = lint(recipe, local_cluster(recipe.spec.required_nodes))
    if not [p for p in found if p.severity == "error"] and recipe.spec.required_nodes <= 16:
        build_plan(recipe, local_cluster(recipe.spec.required_nodes))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_data_loads_or_raises_recipe_error(data: dict[str, Any]) -> None:
    source = TomlSource(data=data, text=SEED_TEXT, path=SEED)
    try:
        recipe = recipe_from_source(source)
    except RecipeError as exc:
        assert exc.problems and all(p.message for p in exc.problems)
        return
    check(recipe)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(SEED_TEXT)), st.integers(0, 40), tricky_text)
def test_mutated_text_loads_or_raises_recipe_error(at: int, cut: int, insert: str) -> None:
    text = SEED_TEXT[:at] + insert + SEED_TEXT[at + cut:]
    try:
        recipe = load_recipe_text(text, SEED)
    except RecipeError as exc:
        assert exc.problems
        return
    check(recipe)


def test_known_paths_cover_the_seed() -> None:
    assert ("staging", 0, "min_free") in ALL_PATHS
    assert ("boot", "must_show", 3, "ranks") in ALL_PATHS
