"""``sparktui`` command line: every capability of the console, scriptable."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from sparktui import __version__
from sparktui.catalog import load_catalog
from sparktui.cli import exits, render
from sparktui.config import recipes_dirs, resolve_cluster, state_dir
from sparktui.core.cluster import Cluster
from sparktui.core.errors import ConfigError, Problem, SetupError, SparkError
from sparktui.core.lints import errors, lint
from sparktui.core.plan import Plan, build_plan
from sparktui.core.recipe import Recipe, find_recipe, json_schema, load_recipe
from sparktui.core.secrets import plan_key

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

Handler = Callable[[argparse.Namespace], int]


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
    return recipe, cluster, build_plan(recipe, cluster, secret_key(cluster)), found


def secret_key(cluster: Cluster) -> bytes:
    """The cluster's plan key from the state folder (made on first use), so the plan hash on a
    container label covers secrets without revealing them."""
    try:
        return plan_key(state_dir(), cluster.name)
    except OSError as exc:
        raise SetupError(f"cannot use the plan key of cluster {cluster.name!r}: "
                         f"{exc.strerror or exc}") from None


def cmd_validate(args: argparse.Namespace) -> int:
    status = 0
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


def _common(p: argparse.ArgumentParser, recipe_nargs: str | None = None) -> None:
    p.add_argument("recipe", nargs=recipe_nargs, metavar="RECIPE",
                   help="a recipe.toml, its folder, or a recipe name under the recipes folder")
    # SUPPRESS: a value given before the command (sparktui --cluster F plan R) is kept
    p.add_argument("--cluster", type=Path, metavar="FILE", default=argparse.SUPPRESS,
                   help="cluster file (default: $SPARKTUI_CLUSTER, ~/.config/sparktui/"
                        "cluster.toml, else the local cluster)")
    p.add_argument("--recipes", type=Path, metavar="DIR", default=argparse.SUPPRESS,
                   help="recipes folder")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="sparktui",
        description="Console for LLM inference engines across small GPU clusters. "
                    "Without a command, opens the console.",
    )
    ap.add_argument("--version", action="version", version=f"sparktui {__version__}")
    ap.add_argument("--cluster", type=Path, metavar="FILE",
                    help="cluster file (default: $SPARKTUI_CLUSTER, ~/.config/sparktui/cluster.toml, "
                         "else the local cluster)")
    ap.add_argument("--recipes", type=Path, metavar="DIR", help="recipes folder")
    ap.add_argument("--theme", metavar="NAME", help="console theme (themes/*.toml; the last chosen is kept)")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("overview", help="list the recipes found and the cluster each runs on")
    p.add_argument("--cluster", type=Path, metavar="FILE", default=argparse.SUPPRESS, help="cluster file")
    p.add_argument("--recipes", type=Path, metavar="DIR", default=argparse.SUPPRESS, help="recipes folder")
    p.set_defaults(func=cmd_overview)

    p = sub.add_parser("validate", help="check recipes (exit 1 on errors; warnings printed)")
    _common(p, "+")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("plan", help="show exactly what every rank will run")
    _common(p)
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument("--rank", type=int, help="show one rank only")
    p.add_argument("--show-secrets", action="store_true",
                   help="show secret values: env names containing KEY, TOKEN, SECRET, PASS(WORD), "
                        "AUTH or CREDENTIAL, values of flags such as --api-key, and the recipe's "
                        "secret_env and secret_args")
    p.set_defaults(func=cmd_plan)

    from sparktui.cli import ops  # imports the backend only when a command needs it

    ops.add_parsers(sub, _common)
    from sparktui.cli import completion, image, watch

    watch.add_parser(sub, _common)
    image.add_parser(sub, _common)
    completion.add_parser(sub)

    p = sub.add_parser("schema", help="print the JSON Schema of the recipe format")
    p.set_defaults(func=cmd_schema)
    return ap


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """Built once per process: building it costs about 9 ms (argparse formats every help), and
    the fuzz test calls ``main`` thousands of times."""
    return parser()


def _console(args: argparse.Namespace) -> int:
    """No command: open the console (the TUI)."""
    from sparktui.ui import run_console

    return run_console(args)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["__complete"]:  # asked by the shell at every tab: no parser, no recipes loaded
        from sparktui.cli.completion import complete

        return complete(words[1:])
    args = _parser().parse_args(argv)
    func: Handler = getattr(args, "func", _console)
    try:
        return func(args)
    except ConfigError as exc:  # a recipe or cluster that cannot be used: nothing was tried
        err.print(render.problems(exc.problems))
        return exits.USAGE
    except SparkError as exc:
        err.print(render.plain(("error:", "bold red"), f" {exc}"))  # verbatim: no markup in exc
        return exits.USAGE if isinstance(exc, (exits.UsageError, SetupError)) else exits.FAILED
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # sparktui ... | head
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
