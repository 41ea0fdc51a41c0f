"""Every rank's command line of every shipped recipe, as the engine's parser gets it: the same
list for the real-parser test (``-m engines``) and the table test run on every CI run."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sparktui.core.cluster import load_cluster, local_cluster
from sparktui.core.engines.argv import DEMO_FLAGS, demo_entrypoint, is_option
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from sparktui.core.recipefiles import list_recipes
from tests.conftest import CLUSTER4, CLUSTER_SLURM4, RECIPES


@dataclass(frozen=True)
class RankLine:
    recipe: str
    cluster: str
    rank: int
    engine: str
    argv: list[str]  # after the entrypoint module: what the engine's parser reads

    @property
    def id(self) -> str:
        return f"{self.recipe}@{self.cluster}/r{self.rank}"


def without_demo_flags(argv: list[str]) -> list[str]:
    """The demo engine's own switches (``--demo-boot-seconds 2``) dropped: the rest is the
    engine's flags, which the demo takes as the engine would."""
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        if token.startswith(DEMO_FLAGS):
            i += 1 if "=" in token or i + 1 >= len(argv) or is_option(argv[i + 1]) else 2
            continue
        out.append(token)
        i += 1
    return out


def rank_lines() -> Iterator[RankLine]:
    """Each shipped recipe on the 4-node test cluster, on the local cluster and on 4 nodes of a
    Slurm cluster, each rank."""
    clusters = (("cluster-4", load_cluster(CLUSTER4)), ("local", local_cluster(4)),
                ("slurm-4", load_cluster(CLUSTER_SLURM4)))
    for entry in list_recipes(RECIPES):
        recipe = load_recipe(entry.path)
        for name, cluster in clusters:
            for rank in build_plan(recipe, cluster).ranks:
                argv = list(rank.container.command)
                if demo_entrypoint(recipe.spec.entrypoint):
                    argv = without_demo_flags(argv)
                yield RankLine(recipe.slug, name, rank.rank, recipe.spec.engine, argv)


RANK_LINES = list(rank_lines())
