"""``sparktui`` command line: every capability of the console, scriptable.

Every verb's arguments are declared here, with the standard library only; a verb's module (and
with it pydantic, Rich, the backend, the docker SDK, asyncssh) is imported when that verb runs
(``Verb``). ``sparktui --version``, ``--help`` and ``completion`` import nothing else, and
``validate`` and ``plan`` only the recipe models: measured in ``bench/cli_start.py``."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from sparktui import __version__
from sparktui.cli import exits
from sparktui.core.errors import ConfigError, SetupError, SparkError

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from typing import Any, NoReturn

Handler = Callable[[argparse.Namespace], int]


class Verb:
    """A verb's handler, named by module and function and imported only when the verb runs:
    building the parser must not import what the other verbs need (``sparktui.cli.ops``
    brings in the backend: 0.2 s of asyncssh and the docker SDK)."""

    def __init__(self, module: str, function: str) -> None:
        self.module = module
        self.function = function

    def __call__(self, args: argparse.Namespace) -> int:
        handler: Handler = getattr(importlib.import_module(f"sparktui.cli.{self.module}"),
                                   self.function)
        return handler(args)


def _common(p: argparse.ArgumentParser, recipe_nargs: str | None = None) -> None:
    p.add_argument("recipe", nargs=recipe_nargs, metavar="RECIPE",
                   help="a recipe.toml, its folder, or a recipe name under the recipes folder")
    # SUPPRESS: a value given before the command (sparktui --cluster F plan R) is kept
    p.add_argument("--cluster", type=Path, metavar="FILE", default=argparse.SUPPRESS,
                   help="cluster file (default: $SPARKTUI_CLUSTER, ~/.config/sparktui/"
                        "cluster.toml, else the local cluster)")
    p.add_argument("--recipes", type=Path, metavar="DIR", default=argparse.SUPPRESS,
                   help="recipes folder")


Declare = Callable[[argparse.ArgumentParser], None]
VERBS: dict[str, tuple[str, str | None, Declare]] = {}
"""Every verb, in the order ``--help`` lists them: its help, its parser's description and the
function that adds its arguments (run only when the verb is built: ``parser(only)``)."""


def verb(name: str, help: str, description: str | None = None) -> Callable[[Declare], Declare]:
    """Declares the verb ``name``: the function it decorates adds the verb's arguments."""
    def register(declare: Declare) -> Declare:
        VERBS[name] = (help, description, declare)
        return declare
    return register


class _Help(argparse.HelpFormatter):
    """argparse's help, as wide as the terminal, found without ``shutil``: argparse makes a
    formatter for every argument added and imports ``shutil`` (and with it ``bz2``, ``lzma``)
    for its width, about 1.3 ms at every start. Same answer as ``shutil.get_terminal_size``
    (tests/cli/test_start.py)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """Every parser of the CLI, its help made by ``_Help``; a verb's parser is made of the
    parser's own class (argparse's ``add_subparsers``), so the verbs' get it too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)


def _columns() -> int:
    """``$COLUMNS`` when a positive number, else the width of the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every verb's arguments, or only those of the verb ``only`` (``verb_of``): argparse
    formats each argument's help as it is added, about 5 ms for all of them at every start."""
    ap = _Parser(
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
    ap.add_argument("--metrics", metavar="[HOST:]PORT",
                    help="the console serves the open recipe's state and its engines' series for "
                         "Prometheus on HOST:PORT (127.0.0.1 unless a host is named)")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name, (summary, description, declare) in VERBS.items():
        if only is None or name == only:
            declare(sub.add_parser(name, help=summary, description=description))
    return ap


_VALUED = {"--cluster", "--recipes", "--theme", "--metrics"}  # the options before a verb that take a value


def verb_of(words: Sequence[str]) -> str | None:
    """The verb of a command line, when it names one (the parser then builds only that verb):
    the first word that is no option nor an option's value. None for no verb, an unknown one,
    or a top-level ``--help`` (which lists them all)."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _VALUED:
            skip = True
        elif word.startswith("-"):
            if word in ("-h", "--help") or word.startswith("--h"):
                return None
        else:
            return word if word in VERBS else None
    return None


def _sample(text: str) -> str:
    """``--sample``: ``all`` or a count of windows (argparse says what is wrong, exit 2)."""
    if text != "all" and not (text.isdigit() and int(text) <= 10**6):
        raise argparse.ArgumentTypeError(f"{text!r} is neither a count of windows nor 'all'")
    return text


def _adopt(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--adopt", action="store_true",
                   help=f"take over another owner's containers: {what} (containers carry their "
                        "owner; sparktui otherwise acts only on yours)")


@verb("overview", "list the recipes found and the cluster each runs on")
def _overview(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", type=Path, metavar="FILE", default=argparse.SUPPRESS, help="cluster file")
    p.add_argument("--recipes", type=Path, metavar="DIR", default=argparse.SUPPRESS, help="recipes folder")
    p.set_defaults(func=Verb("recipes", "cmd_overview"))


@verb("validate", "check recipes and the console's config.toml (exit 1 on errors; warnings printed)")
def _validate(p: argparse.ArgumentParser) -> None:
    _common(p, "*")
    p.set_defaults(func=Verb("recipes", "cmd_validate"))


@verb("plan", "show exactly what every rank will run")
def _plan(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument("--rank", type=int, help="show one rank only")
    p.add_argument("--show-secrets", action="store_true",
                   help="show secret values: env names containing KEY, TOKEN, SECRET, PASS(WORD), "
                        "AUTH or CREDENTIAL, values of flags such as --api-key, and the recipe's "
                        "secret_env and secret_args")
    p.set_defaults(func=Verb("recipes", "cmd_plan"))


# -- the verbs over the Orchestrator (``sparktui.cli.ops``) ------------------------------------
@verb("doctor", "preflight every node (SSH, Docker, image, disk, port, NICs, GPUs, memory fit)")
def _doctor(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Verb("ops", "cmd_doctor"))


@verb("stage", "place each rank's data on its node (all nodes at once)")
def _stage(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--verify-only", action="store_true", help="report, write nothing (exit 1 if stale)")
    p.add_argument("--sample", metavar="N|all", type=_sample,
                   help="row windows to compare with the source per packed file, besides the first "
                        "and the last (default 8); all: every chunk of both against the ledger")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Verb("ops", "cmd_stage"))


@verb("up", "stage, then launch every rank (all at once) and follow their logs")
def _up(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--wait", action="store_true", help="return when ready (0) or failed/timed out (1)")
    p.add_argument("--launch-order", choices=["parallel", "workers-first", "head-first"],
                   default="parallel", help="start every rank at once (default), or the workers "
                   "(the head) first, then the others")
    p.add_argument("--no-image-check", action="store_true",
                   help="start even when the image is missing on a node or differs across nodes")
    p.add_argument("--no-port-check", action="store_true",
                   help="start even when something on a node listens on a rank's API port")
    p.add_argument("--no-memory-check", action="store_true",
                   help="start even when a node's free memory is short of what its ranks need "
                        "(the weights from the snapshot's headers, the engine's memory fraction)")
    _adopt(p, "reattach to another owner's run of this recipe (or replace its stopped containers)")
    p.set_defaults(func=Verb("ops", "cmd_up"))


@verb("status", "per rank: state, container, checks, health, restarts")
def _status(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Verb("status", "cmd_status"))


@verb("logs", "the run's logs (caught up from the containers first)")
def _logs(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--rank", type=int)
    p.add_argument("--follow", "-f", action="store_true")
    p.add_argument("--grep", metavar="REGEX",
                   help="only lines matching REGEX; case-insensitive unless it has a capital; "
                        "!REGEX: only lines NOT matching")
    p.add_argument("--since", metavar="DURATION", help="only lines newer than this (10m, 90s)")
    p.add_argument("--timestamps", "-t", action="store_true")
    p.add_argument("--raw", action="store_true",
                   help="write the lines as the engine wrote them, escape sequences included "
                        "(default: control characters other than tab shown as \\x1b)")
    p.set_defaults(func=Verb("logs", "cmd_logs"))


@verb("restart", "replace one rank's container (--rank N) or every rank's (--group), in the same run")
def _restart(p: argparse.ArgumentParser) -> None:
    _common(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--rank", type=int, help="this rank only (a formed TP group fails with it)")
    which.add_argument("--group", action="store_true",
                       help="every rank of the group: stopped, then launched again, workers first")
    p.add_argument("--wait", action="store_true")
    _adopt(p, "restart another owner's containers of this recipe; the new ones are yours")
    p.set_defaults(func=Verb("ops", "cmd_restart"))


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


@verb("smoke", "one streamed chat completion to the head: TTFT and tokens/s (--n N: N of them)")
def _smoke(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--n", type=_at_least_one, metavar="N",
                   help="send N requests: a line for each and a summary (p50/p95 first token)")
    p.add_argument("--concurrency", type=_at_least_one, default=1, metavar="C",
                   help="with --n: C requests at once (default 1, one after another)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Verb("ops", "cmd_smoke"))


@verb("top", "the engines' own numbers (their /metrics): throughput, requests running and "
             "queued, KV use, TTFT p95, per rank and for the group; refreshes")
def _top(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--once", action="store_true",
                   help="print one table and exit (two readings --over seconds apart: rates and "
                        "percentiles need two)")
    p.add_argument("--over", type=float, default=2.0, metavar="SECONDS",
                   help="with --once: seconds between its two readings (default 2)")
    p.add_argument("--every", type=float, metavar="SECONDS",
                   help="seconds between two readings (default: the recipe's [metrics] interval)")
    p.add_argument("--json", action="store_true", help="with --once: the values as JSON")
    p.set_defaults(func=Verb("top", "cmd_top"))


@verb("dump", "every rank's Python stacks, last 200 lines and processes, all ranks at once; "
              "saved in the run's folder")
def _dump(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Verb("ops", "cmd_dump"))


@verb("down", "stop and remove every rank's container (your own)")
def _down(p: argparse.ArgumentParser) -> None:
    _common(p)
    _adopt(p, "remove another owner's containers of this recipe too")
    p.set_defaults(func=Verb("ops", "cmd_down"))


# -- the others ---------------------------------------------------------------------------------
@verb("bundle", "one .tar.gz of a run to attach to an upstream issue: plan, events, logs, "
                "checks, stall and canary history, stack dumps, node facts; secrets masked")
def _bundle(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--run", metavar="ID", help="an earlier run of the recipe (default: its newest)")
    p.add_argument("--output", "-o", type=Path, metavar="PATH",
                   help="the archive, or a folder to put it in (default: "
                        "./sparktui-bundle-<run id>.tar.gz)")
    p.add_argument("--max-log-mb", type=float, default=50, metavar="N",
                   help="at most the last N MB of each rank's log (default 50; what is cut is "
                        "said in the bundle's README.txt)")
    p.set_defaults(func=Verb("bundle", "cmd_bundle"))


@verb("watch", "follow a running recipe and restart its group on failure ([restart] policy); "
               "containers outlive it")
def _watch(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--metrics", metavar="[HOST:]PORT",
                   help="serve sparktui's state and the engines' series for Prometheus on "
                        "HOST:PORT (default host 127.0.0.1: loopback unless told otherwise)")
    p.set_defaults(func=Verb("watch", "cmd_watch"))


@verb("image", "the recipe's image on the nodes (sync)")
def _image(p: argparse.ArgumentParser) -> None:
    verbs = p.add_subparsers(dest="image_command", metavar="VERB", required=True)
    s = verbs.add_parser("sync", help="copy the recipe's image to every node that lacks it or holds "
                                      "another build (from one save stream, all nodes at once)")
    _common(s)
    s.add_argument("--from", dest="source", metavar="NODE|local",
                   help="where to copy from: a node of the cluster, or local (this machine's "
                        "Docker engine); default the head if it has the image, else the first node "
                        "that has it, else this machine")
    s.add_argument("--json", action="store_true", help="one JSON object with every node's outcome")
    s.set_defaults(func=Verb("image", "cmd_sync"))


@verb("completion", "print a shell completion script (bash, zsh or fish)",
      description='bash: eval "$(sparktui completion bash)"; zsh: the same with zsh; fish: '
                  "sparktui completion fish | source")
def _completion(p: argparse.ArgumentParser) -> None:
    from sparktui.cli import completion  # standard library only

    completion.arguments(p, parser)


@verb("schema", "print the JSON Schema of the recipe format")
def _schema(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=Verb("recipes", "cmd_schema"))


@functools.cache
def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """Built once per process and verb: the fuzz test calls ``main`` thousands of times."""
    return parser(only)


def _console(args: argparse.Namespace) -> int:
    """No command: open the console (the TUI)."""
    from sparktui.ui import run_console

    return run_console(args)


def _report(exc: SparkError) -> int:
    """One sentence (or the problems, each at its line) on stderr, and the exit code. Rich is
    imported here, on the way out, not at every start."""
    from rich.console import Console

    from sparktui.cli import render

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if isinstance(exc, ConfigError):  # a recipe or cluster that cannot be used: nothing was tried
        err.print(render.problems(exc.problems))
        return exits.USAGE
    err.print(render.plain(("error:", "bold red"), f" {exc}"))  # verbatim: no markup in exc
    return exits.USAGE if isinstance(exc, (exits.UsageError, SetupError)) else exits.FAILED


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["__complete"]:  # asked by the shell at every tab: no parser, no recipes loaded
        from sparktui.cli.completion import complete

        return complete(words[1:])
    args = _parser(verb_of(words)).parse_args(words)
    func: Handler = getattr(args, "func", _console)
    try:
        _tighten_state()
        code = func(args)
        if argv is None and getattr(args, "leave_at_once", False):
            _leave(code)
        return code
    except SparkError as exc:  # ConfigError too
        return _report(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # sparktui ... | head
        sys.stderr.close()
        return 0


def _tighten_state() -> None:
    """Once per state folder: what an older sparktui left readable by other users is made
    private, with one line on stderr saying so (before the console opens, it stays on the
    terminal)."""
    from sparktui.config import config_dir, state_dir
    from sparktui.core.private import tighten_once

    try:
        said = tighten_once(state_dir(), (config_dir() / "state.json",))
    except SetupError:  # no home: the verb that needs a folder says so
        return
    if said:
        sys.stderr.write(said + "\n")


def _leave(code: int) -> NoReturn:
    """End the process now, its output flushed: a command that holds nothing to close (no
    connection, thread, temporary file or worker) sets ``leave_at_once``, and the
    interpreter's teardown (freeing every module and object one by one: 7.5 ms after a
    grep over a long run) is skipped. Only as the program (``main()`` without ``argv``)."""
    with contextlib.suppress(BrokenPipeError):  # sparktui logs ... | head
        sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
