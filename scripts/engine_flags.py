"""Write the engines' own flag tables: every option of SGLang's and vLLM's server argument
parsers, read from the installed packages (``pip install .[engines]``, CPU torch; nothing needs
a GPU), as ``sparktui/core/engines/flags/<engine>-<version>.json``.

    python scripts/engine_flags.py            # both engines, from this Python's packages
    python scripts/engine_flags.py sglang     # one

Each flag: its option strings, the field it sets (``dest``), the kind of value it takes (``int``,
``float``, ``str``, ``bool`` for a switch, ``json``, ``other`` for a parser's own function:
accepted as it is), its choices, whether it takes a value (``nargs``), and its default where it
is plain JSON (vLLM prints only the fields that differ from it). The tables are data: sparktui
reads them without the engines installed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "sparktui" / "core" / "engines" / "flags"
KINDS = {int: "int", float: "float", str: "str"}
JSON_TYPES = ("loads", "json_loads", "json_list_type", "parse_json")


def _unwrap(kind: Any) -> tuple[Any, bool]:
    """vLLM wraps a type in ``optional_type(int)`` (``None`` or an empty value gives None) and
    ``parse_type(json.loads)``: the wrapped function, and whether ``None`` is accepted."""
    qualname = getattr(kind, "__qualname__", "")
    cells = getattr(kind, "__closure__", None) or ()
    if qualname.startswith(("optional_type.", "parse_type.")) and cells:
        return cells[0].cell_contents, qualname.startswith("optional_type.")
    return kind, False


def _kind(action: argparse.Action) -> tuple[str, bool]:
    """The kind of value ``action`` takes and whether ``None`` is one."""
    if action.nargs == 0:
        return "bool", False
    kind, nullable = _unwrap(action.type)
    if kind is None:
        return "str", nullable
    if kind in KINDS:
        return KINDS[kind], nullable
    name = getattr(kind, "__name__", "")
    if name in JSON_TYPES:
        return "json", nullable
    if name.startswith("human_readable_int"):
        return "int-like", nullable  # 1k, 2M, 25.6k (and "auto" for the _or_auto one)
    return "other", nullable


def _plain(value: Any) -> Any:
    """``value`` where JSON holds it as it is; else its repr, marked."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return {"repr": repr(value)[:200]}


def table(parser: argparse.ArgumentParser, engine: str, version: str, source: str) -> dict[str, Any]:
    flags = []
    # Every spelling the parser answers to: vLLM's EnableDisableAction rewrites option_strings
    # after registering (--no-enable-x is accepted but no longer listed there).
    registered: dict[int, list[str]] = {}
    for spelling, registered_action in parser._option_string_actions.items():
        registered.setdefault(id(registered_action), []).append(spelling)
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        choices = action.choices
        if isinstance(choices, (set, frozenset)):  # a set's order changes from run to run
            choices = sorted(choices, key=str)
        kind, nullable = _kind(action)
        options = list(action.option_strings)
        options += [o for o in registered.get(id(action), []) if o not in options]
        flags.append({
            "options": options,
            "dest": action.dest,
            "kind": kind,
            "nullable": nullable,
            "choices": [str(c) for c in choices] if choices is not None else None,
            "nargs": action.nargs if isinstance(action.nargs, (int, str)) or action.nargs is None
            else str(action.nargs),
            "negatable": isinstance(action, argparse.BooleanOptionalAction),
            "default": _plain(action.default),
        })
    flags.sort(key=lambda f: f["options"][0])
    return {"engine": engine, "version": version, "source": source,
            "regenerate": "pip install '.[engines]' && python scripts/engine_flags.py",
            "flags": flags}


def sglang() -> dict[str, Any]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    version = importlib.metadata.version("sglang")
    return table(parser, "sglang", version, "sglang.srt.server_args.ServerArgs.add_cli_args")


def vllm() -> dict[str, Any]:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    version = importlib.metadata.version("vllm")
    return table(parser, "vllm", version,
                 "vllm.entrypoints.common.cli_args.make_arg_parser(FlexibleArgumentParser())")


def main(argv: list[str]) -> int:
    wanted = argv or ["sglang", "vllm"]
    OUT.mkdir(parents=True, exist_ok=True)
    for name in wanted:
        data = {"sglang": sglang, "vllm": vllm}[name]()
        path = OUT / f"{name}-{data['version']}.json"
        path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        print(f"{path}: {len(data['flags'])} flags", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
