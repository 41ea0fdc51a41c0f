"""The engine adapters: each engine's rank flags, who serves HTTP, what is probed, and that the
recipe and the plan take every such rule from the adapter (one place)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from sparktui.core.cluster import load_cluster, local_cluster
from sparktui.core.engines import ENGINES, FATAL_LINES, Launch, Probe, engine, flagtable
from sparktui.core.errors import RecipeError
from sparktui.core.plan import build_plan
from sparktui.core.recipe import EngineName, flag_name, load_recipe, load_recipe_text
from tests.conftest import CLUSTER4, RECIPES, SEED

VLLM_RECIPE = """\
engine = "vllm"
docker_image = "vllm/vllm-openai:latest"
model = "Qwen/Qwen3-0.6B"
required_nodes = 4
tensor_parallel_size = 4
args = ["--max-num-seqs", "16"]
"""


def launch(rank: int, nnodes: int = 4, backend: str = "mp") -> Launch:
    return Launch(model="org/M", nnodes=nnodes, rank=rank, head_addr="10.0.0.1", dist_port=25000,
                  port=8000, tp_size=4, distributed_backend=backend)


def test_recipe_engines_are_the_adapters() -> None:
    assert set(get_args(EngineName)) == set(ENGINES)
    for name, adapter in ENGINES.items():
        assert adapter.name == name


def test_sglang_rank_flags() -> None:
    sglang = engine("sglang")
    assert sglang.rank_flags(launch(2)) == [
        "--model-path", "org/M", "--nnodes", "4", "--node-rank", "2",
        "--dist-init-addr", "10.0.0.1:25000", "--host", "0.0.0.0", "--port", "8000",
        "--tp-size", "4"]
    assert all(sglang.serves_http(r, 4, "mp") for r in range(4))
    assert sglang.probes(0) == (Probe("/health"), Probe("/v1/models", names_model=True))
    assert sglang.probes(1) == (Probe("/health"),)


def test_vllm_rank_flags_head_and_headless_workers() -> None:
    vllm = engine("vllm")
    common = ["--model", "org/M", "--host", "0.0.0.0", "--port", "8000",
              "--tensor-parallel-size", "4"]
    multi = ["--nnodes", "4", "--master-addr", "10.0.0.1", "--master-port", "25000"]
    head, worker = vllm.rank_flags(launch(0)), vllm.rank_flags(launch(3))
    assert head == [*common, "--nnodes", "4", "--node-rank", "0", *multi[2:]]
    assert worker == [*common, "--nnodes", "4", "--node-rank", "3", *multi[2:], "--headless"]
    assert vllm.rank_flags(launch(0, nnodes=1)) == common  # one node: no multi-node flags
    assert [vllm.serves_http(r, 4, "mp") for r in range(4)] == [True, False, False, False]
    assert vllm.serves_http(0, 1, "mp")
    assert vllm.probes(0) == (Probe("/health"), Probe("/v1/models", names_model=True))
    assert vllm.probes(1) == ()  # headless: nothing to ask


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_flag_the_launcher_appends_is_launcher_owned(name: str) -> None:
    adapter = engine(name)
    for rank in range(4):
        flags = {f for t in adapter.rank_flags(launch(rank)) if (f := flag_name(t))}
        assert flags <= set(adapter.launcher_flags)


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_alias_of_a_launcher_flag_is_launcher_owned(name: str) -> None:
    """The spellings the engine's own parser gives a launcher flag (its shipped table) are all
    owned, so a recipe whose table is off (``engine_flags = "none"``) is refused them too."""
    table = flagtable.load(name)
    assert table is not None
    owned = set(engine(name).launcher_flags)
    for option in owned:
        flag = table.option(option)
        assert flag is not None, option
        assert set(flag.options) <= owned


def test_the_recipe_refuses_flags_the_adapter_owns() -> None:
    with pytest.raises(RecipeError, match="--master-port is set by the launcher"):
        load_recipe_text(VLLM_RECIPE.replace('"16"]', '"16", "--master-port", "1"]'))


@pytest.mark.parametrize(("recipe", "token", "said"), [
    ("seed", "--tp-size", "--tp-size is set"),
    ("seed", "--tensor-parallel-size", "--tensor-parallel-size is set"),
    ("seed", "--tp-size=4", "--tp-size is set"),
    ("seed", "--tp", "--tp (SGLang 0.5.23's parser reads it as --tp-size) is set"),
    ("seed", "--tensor-par", "--tensor-par (SGLang 0.5.23's parser reads it as --tp-size) is set"),
    ("vllm", "--tensor-parallel-size", "--tensor-parallel-size is set"),
    ("vllm", "-tp", "-tp is set"),
    ("vllm", "-tp=4", "-tp is set"),
    ("vllm", "--tensor_parallel_size", "--tensor-parallel-size is set"),
    ("vllm", "--tensor-p", "--tensor-p (vLLM 0.33.0's parser reads it as --tensor-parallel-size)"),
    ("vllm", "-n", "-n is set"),
    ("seed", "--nccl-init-addr", "--nccl-init-addr is set"),
])
def test_a_recipe_setting_the_tp_size_in_args_is_refused_with_its_line(
        recipe: str, token: str, said: str) -> None:
    """The launcher appends the TP flag; any spelling the engine's parser reads as it, in args,
    is the launcher-flag error at its line."""
    if recipe == "seed":
        text = SEED.read_text().replace('    "--watchdog-timeout", "1800",\n',
                                        f'    "--watchdog-timeout", "1800",\n    "{token}", "4",\n')
    else:
        text = VLLM_RECIPE.replace('"16"]', f'"16",\n  "{token}", "4"]')
    line = next(n for n, t in enumerate(text.splitlines(), 1) if f'"{token}"' in t)
    with pytest.raises(RecipeError) as caught:
        load_recipe_text(text, Path("r/recipe.toml"))
    (problem,) = caught.value.problems
    assert problem.code == "launcher-flag" and problem.line == line
    assert said in problem.message


@pytest.mark.parametrize(("recipe", "cluster"), [
    (RECIPES / "dsv41-flash-4x-mia" / "recipe.toml", "4"),
    (RECIPES / "demo-tp4" / "recipe.toml", "local"),
    (RECIPES / "demo-vllm-tp4" / "recipe.toml", "local"),
    (None, "4"),
])
def test_every_rank_carries_the_engines_tp_flag(recipe: Path | None, cluster: str) -> None:
    loaded = load_recipe(recipe) if recipe else load_recipe_text(VLLM_RECIPE)
    flag = {"sglang": "--tp-size", "vllm": "--tensor-parallel-size"}[loaded.spec.engine]
    plan = build_plan(loaded, load_cluster(CLUSTER4) if cluster == "4" else local_cluster(4))
    for rank in plan.ranks:
        command = rank.container.command
        assert command.count(flag) == 1
        assert command[command.index(flag) + 1] == "4"


def test_defaults_come_from_the_adapter() -> None:
    recipe = load_recipe_text(VLLM_RECIPE)
    assert recipe.spec.api_port == engine("vllm").default_port == 8000
    plan = build_plan(recipe, load_cluster(CLUSTER4))
    assert plan.boot.ready == "Application startup complete."
    assert plan.boot.must_not_show[-len(FATAL_LINES):] == list(FATAL_LINES)
    assert load_recipe(SEED).spec.api_port == 30000


def test_plan_knows_who_serves_http() -> None:
    cluster = load_cluster(CLUSTER4)
    plan = build_plan(load_recipe_text(VLLM_RECIPE), cluster)
    assert [r.serves_http for r in plan.ranks] == [True, False, False, False]
    assert plan.distributed_backend == "mp"
    assert plan.ranks[1].container.command[-1] == "--headless"
    data = plan.to_json()
    assert [r["serves_http"] for r in data["ranks"]] == [True, False, False, False]
    assert data["recipe"]["distributed_backend"] == "mp"
    sglang = build_plan(load_recipe(SEED), cluster)
    assert all(r.serves_http for r in sglang.ranks)


@pytest.mark.parametrize(("recipe", "digest"), [
    (SEED, "61176117294e"),
    (RECIPES / "demo-tp4" / "recipe.toml", "05d22feb3404"),  # issue 29: its args gained --enable-metrics
    (None, "74ca928af6aa"),
])
def test_plan_hash_of_a_running_cluster_does_not_change(recipe: Path | None, digest: str) -> None:
    """The hashes since the TP flag reached the engine (issue 24: every rank's command line
    gained it, so a group launched before shows as a changed plan, which it is); the demo
    recipe's since its args gained --enable-metrics (issue 29: the recipe changed, so does its
    plan)."""
    loaded = load_recipe(recipe) if recipe else load_recipe_text(VLLM_RECIPE)
    assert build_plan(loaded, load_cluster(CLUSTER4)).plan_hash == digest


@pytest.mark.parametrize("recipe", ["demo-tp4", "demo-vllm-tp4"])
def test_the_local_cluster_listens_on_the_loopback(recipe: str) -> None:
    """A rank on this machine answers this machine only; a real node's on every interface
    (its clients and the other nodes reach it there)."""
    loaded = load_recipe(RECIPES / recipe / "recipe.toml")
    for rank in build_plan(loaded, local_cluster(4)).ranks:
        command = rank.container.command
        assert command[command.index("--host") + 1] == "127.0.0.1"
