"""The recipe catalog: every recipe of the recipes folders, loaded and linted on the cluster it
would run on. What the console offers and what ``sparktui overview`` lists. Loading never
raises: problems are part of the entry. No Textual here: the CLI imports it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sparktui.config import resolve_cluster
from sparktui.core.cluster import Cluster
from sparktui.core.errors import ConfigError, Problem
from sparktui.core.lints import errors, lint
from sparktui.core.recipe import Recipe, load_recipe
from sparktui.core.recipefiles import list_recipes

DEMO_RECIPE = "demo-tp4"


@dataclass(frozen=True)
class RecipeInfo:
    slug: str
    path: Path
    folder: Path
    text: str = ""
    recipe: Recipe | None = None
    cluster: Cluster | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return errors(self.problems)

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity != "error"]

    @property
    def usable(self) -> bool:
        return self.recipe is not None and self.cluster is not None and not self.errors

    @property
    def shown_path(self) -> str:
        """The recipe's path relative to its recipes folder (``demo-tp4/recipe.toml``)."""
        try:
            return str(self.path.relative_to(self.folder.parent))
        except ValueError:
            return str(self.path)


def load_info(slug: str, path: Path, folder: Path, cluster_path: Path | None) -> RecipeInfo:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return RecipeInfo(slug, path, folder, problems=[Problem(str(exc.strerror or exc), code="io")])
    try:
        recipe = load_recipe(path)
    except ConfigError as exc:
        return RecipeInfo(slug, path, folder, text, problems=exc.problems)
    try:
        cluster = resolve_cluster(cluster_path, recipe.spec.required_nodes)
    except ConfigError as exc:
        return RecipeInfo(slug, path, folder, text, recipe, problems=exc.problems)
    return RecipeInfo(slug, path, folder, text, recipe, cluster, lint(recipe, cluster))


def load_catalog(dirs: Sequence[Path], cluster_path: Path | None) -> list[RecipeInfo]:
    """Every recipe of ``dirs``; a name found in an earlier folder hides later ones."""
    seen: dict[str, RecipeInfo] = {}
    for folder in dirs:
        for entry in list_recipes(folder):
            if entry.slug not in seen:
                seen[entry.slug] = load_info(entry.slug, entry.path, folder, cluster_path)
    return list(seen.values())


def default_slug(infos: Sequence[RecipeInfo], remembered: str | None) -> str | None:
    """The recipe to open: the last one used, else the demo, else the first usable one."""
    slugs = [i.slug for i in infos]
    for wanted in (remembered, DEMO_RECIPE):
        if wanted in slugs:
            return wanted
    usable = [i.slug for i in infos if i.usable]
    choices = usable or slugs
    return choices[0] if choices else None
