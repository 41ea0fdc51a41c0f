"""The verbs over recipes and plans, which need no connection: validate, plan, overview, schema.

Imported only when one of them runs (``sparktui.cli`` builds the parser without it): the recipe
models (pydantic) and Rich are what these verbs need, and nothing of the backend."""

from __future__ import annotations

import argparse
import json
import os

from rich.console import Console

from sparktui import __version__
from sparktui.cli import render
from sparktui.config import cluster_plan, config_dir, recipes_dirs, resolve_cluster
from sparktui.core.cluster import Cluster
from sparktui.core.errors import ConfigError, display_path
from sparktui.core.lints import errors, lint
from sparktui.core.plan import Plan
from sparktui.core.problems import Problem
from sparktui.core.recipe import Recipe, find_recipe, json_schema, load_recipe

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _load(args: argparse.Namespace, recipe_arg: str) -> tuple[Recipe, Cluster, list[Problem]]:
    path = find_recipe(recipe_arg, recipes_dirs(args.recipes))
    recipe = load_recipe(path)
    cluster = resolve_cluster(args.cluster, recipe.spec.required_nodes)
    return recipe, cluster, lint(recipe, cluster)


def load_plan(args: argparse.Namespace) -> tuple[Recipe, Cluster, Plan, list[Problem]]:
    """Recipe, cluster and plan; lint errors raise so no command runs a broken recipe."""
    recipe, cluster, found = _load(args, args.recipe)
    if errors(found):
        raise ConfigError(found)
    return recipe, cluster, cluster_plan(recipe, cluster), found


def cmd_validate(args: argparse.Namespace) -> int:
    status = _validate_settings(quiet=bool(args.recipe))
    for arg in args.recipe:
        try:
            recipe, cluster, found = _load(args, arg)
        except ConfigError as exc:
            err.print(render.problems(exc.problems))
            status = 1
            continue
        if found:
            err.print(render.problems(found))
        n_err = len(errors(found))
        n_warn = len(found) - n_err
        where = recipe.source.display or arg
        if n_err:
            status = 1
            err.print(render.plain(("✗", "red"), f" {where}: {n_err} error(s), {n_warn} warning(s)"))
        else:
            note = f", {n_warn} warning(s)" if n_warn else ""
            out.print(render.plain(("✓", "green"), f" {where}: valid for cluster {cluster.name!r}"
                                   f" ({recipe.spec.required_nodes} of {len(cluster.nodes)} nodes)"
                                   f"{note}"), soft_wrap=True)
    return status


def _validate_settings(quiet: bool) -> int:
    """The console's ``config.toml`` and ``SPARKTUI_`` settings, checked as recipes are (each
    problem at its file, line and key): 1 when one is wrong. Only when there is any (reading
    them loads the console's package, Textual included)."""
    path = config_dir() / "config.toml"
    if not path.is_file() and not any(_is_setting(name) for name in os.environ):
        if not quiet:
            out.print(render.plain(f"no {path}: the console uses its defaults"), soft_wrap=True)
        return 0
    from sparktui.ui.settings import load_settings

    found = load_settings().problems
    if found:
        err.print(render.problems(found))
        err.print(render.plain(("✗", "red"), f" {display_path(path)}: {len(found)} error(s)"),
                  soft_wrap=True)
        return 1
    if not quiet:
        out.print(render.plain(("✓", "green"), f" {display_path(path)}: valid"), soft_wrap=True)
    return 0


def _is_setting(name: str) -> bool:
    """A ``SPARKTUI_`` variable the console's settings read (``SPARKTUI_THEME``, or a table's
    key after two underscores), not one of the others (``SPARKTUI_CLUSTER``)."""
    return name == "SPARKTUI_THEME" or (name.startswith("SPARKTUI_") and "__" in name)


def cmd_plan(args: argparse.Namespace) -> int:
    recipe, _cluster, plan, found = load_plan(args)
    if found:
        err.print(render.problems(found))
    if args.json:
        print(json.dumps(plan.to_json(show_secrets=args.show_secrets), indent=2))
    else:
        out.print(render.plan_view(plan, show_secrets=args.show_secrets, only_rank=args.rank,
                                   appended_from=len(recipe.spec.args)))
    return 0


def cmd_overview(args: argparse.Namespace) -> int:
    """What sparktui sees here: recipes found and the cluster each would run on."""
    from sparktui.catalog import load_catalog

    dirs = recipes_dirs(args.recipes)
    out.print(render.plain((f"sparktui {__version__}", "b"), " · recipes from ",
                           ", ".join(str(d) for d in dirs) or "(none found)"), soft_wrap=True)
    for info in load_catalog(dirs, args.cluster):
        out.print(render.catalog_line(info), soft_wrap=True)
    out.print("\nTry: sparktui plan RECIPE · sparktui validate RECIPE · sparktui --help")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return 0
