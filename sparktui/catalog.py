"""The recipe catalog: every recipe of the recipes folders, loaded and linted on the cluster it
would run on. What the console offers and what ``sparktui overview`` lists. Loading never
raises: problems are part of the entry (a file that is not UTF-8 included). A name found in an
earlier folder hides the same name in later ones, and the entry says which files it hides. No
Textual here: the CLI imports it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from sparktui.config import resolve_cluster, shipped
from sparktui.core.cluster import Cluster
from sparktui.core.controls import visible
from sparktui.core.errors import ConfigError
from sparktui.core.lints import errors, lint
from sparktui.core.names import is_safe
from sparktui.core.problems import Problem
from sparktui.core.recipe import MAX_SLUG, Recipe, load_recipe
from sparktui.core.recipefiles import list_recipes
from sparktui.core.secrets import mask_source

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
    hides: tuple[Path, ...] = ()
    """Recipes of the same name in later folders, which this one hides (a ``./recipes`` copy of
    a shipped recipe, say)."""

    @property
    def hides_shipped(self) -> Path | None:
        """The shipped recipe of the same name that this one hides, if any."""
        try:
            root = shipped("recipes").resolve()
        except OSError:
            return None
        return next((p for p in self.hides if p.resolve().is_relative_to(root)), None)

    def hides_text(self, paths: bool = True) -> str:
        """``hides the shipped demo-tp4 (/…/recipe.toml)``, or the other files it hides; "" if
        none. Without ``paths`` (a narrow pane): only what it hides."""
        if not self.hides:
            return ""
        shipped_one = self.hides_shipped
        if shipped_one is not None:
            return f"hides the shipped {self.slug}" + (f" ({shipped_one})" if paths else "")
        if not paths:
            return f"hides {len(self.hides)} other recipe(s) named {self.slug}"
        return "hides " + ", ".join(str(p) for p in self.hides)

    @functools.cached_property
    def shown_text(self) -> str:
        """The source as the recipe pane shows it: secret values masked as the plan masks them
        (``HF_TOKEN = "********"``), everything else verbatim."""
        return mask_source(self.text)

    @property
    def errors(self) -> list[Problem]:
        return errors(self.problems)

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity != "error"]

    @property
    def usable(self) -> bool:
        return self.name_ok and self.recipe is not None and self.cluster is not None and not self.errors

    @property
    def name_ok(self) -> bool:
        """The name can become containers and run folders (``core.names``). A folder whose name
        fails (``[@click=app.screenshot(...)]x``, an escape) is listed as unusable and never
        offered as an action: no palette hit, it cannot be opened, nothing quotes it as markup."""
        return is_safe(self.slug) and len(self.slug) <= MAX_SLUG

    def name_sentence(self) -> str:
        """Why the name cannot be used, its controls written out."""
        cut = "…" if len(self.slug) > 80 else ""
        return (f"not a usable recipe name: \"{visible(self.slug[:80])}{cut}\" (a recipe's name "
                "has letters, digits, '.', '_' and '-', a letter or digit first, at most "
                f"{MAX_SLUG} characters; rename its folder or file)")

    @property
    def shown_path(self) -> str:
        """The recipe's path relative to its recipes folder (``demo-tp4/recipe.toml``)."""
        try:
            return str(self.path.relative_to(self.folder.parent))
        except ValueError:
            return str(self.path)


def load_info(slug: str, path: Path, folder: Path, cluster_path: Path | None) -> RecipeInfo:
    unnamed = RecipeInfo(slug, path, folder)
    if not unnamed.name_ok:  # not even read: it would only be shown, and it cannot run
        return replace(unnamed, problems=[Problem(unnamed.name_sentence(), code="name")])
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return RecipeInfo(slug, path, folder, problems=[Problem(str(exc.strerror or exc), code="io")])
    # shown even when it is not UTF-8 (load_recipe says where); never a crash of the whole list
    text = raw.decode("utf-8", errors="replace")
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
    """Every recipe of ``dirs``; a name found in an earlier folder hides later ones (the entry
    lists what it hides)."""
    seen: dict[str, RecipeInfo] = {}
    for folder in dirs:
        for entry in list_recipes(folder):
            first = seen.get(entry.slug)
            if first is None:
                seen[entry.slug] = load_info(entry.slug, entry.path, folder, cluster_path)
            else:
                seen[entry.slug] = replace(first, hides=(*first.hides, entry.path))
    return list(seen.values())


def default_slug(infos: Sequence[RecipeInfo], remembered: str | None) -> str | None:
    """The recipe to open: the last one used, else the demo, else the first usable one."""
    slugs = [i.slug for i in infos if i.name_ok]  # a remembered name is read from a file too
    for wanted in (remembered, DEMO_RECIPE):
        if wanted in slugs:
            return wanted
    usable = [i.slug for i in infos if i.usable]
    choices = usable or slugs
    return choices[0] if choices else None
