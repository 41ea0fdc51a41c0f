"""A recipe's ``args`` read as the engine's own parser reads them, through its flag table: which
flag each option names, the values it takes, and what the parser would refuse. Pure and cheap:
one pass over the args, table lookups by dict and bisect."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.core.engines.flagtable import Flag, FlagTable, load

DEMO_MODULE = "sparktui.demo.engine"
DEMO_FLAGS = "--demo-"  # the demo engine's own switches; it takes the engine's flags besides
SERVER_MODULES = {
    "sglang": ("sglang.launch_server", DEMO_MODULE),
    "vllm": ("vllm.entrypoints.openai.api_server", DEMO_MODULE),
}
SERVER_COMMANDS = {"vllm": ("vllm", "serve"), "sglang": ("sglang", "serve")}
_NEGATIVE = re.compile(r"-\.?\d")
# human_readable_int (both engines): 4096, 1k, 2M, 25.6k, 1Ki; its "_or_auto" form also "auto"
_INT_LIKE = re.compile(r"[+-]?\d+(\.\d+)?\s*([kKmMgGtT]i?)?|auto|-1")


@dataclass(frozen=True)
class FlagUse:
    """One option of the args and the values the parser gives it."""

    index: int  # where the option is in args
    spelling: str  # as written, without ``=value``
    flag: Flag | None  # None: unknown to the table (or an ambiguous prefix)
    ambiguous: tuple[str, ...]  # the options an ambiguous prefix matched
    values: tuple[tuple[int, str], ...]  # (index in args, value)
    inline: bool  # ``--flag=value``
    missing: bool = False  # takes a value and none follows


def is_option(token: str) -> bool:
    """An option as argparse sees one: ``-x``/``--x``, not a negative number (neither engine
    has an option that looks like one, so argparse reads ``-1`` as a value)."""
    return token.startswith("-") and len(token) > 1 and token != "--" \
        and _NEGATIVE.match(token) is None


def serves_engine(engine: str, entrypoint: list[str] | None) -> bool:
    """Whether ``args`` go to the engine's own server parser: its module run with ``-m``
    (``python3 -m sglang.launch_server``, ``python -m vllm.entrypoints.openai.api_server``, the
    demo engine, which takes the engine's flags), its CLI (``vllm serve``), or the image's own
    entrypoint (none given: the engines' images start their server). A wrapper (``sh -c``, a
    ``boot.py``) gets args the table cannot speak for."""
    if not entrypoint:
        return True
    words = list(entrypoint)
    if "-m" in words[:-1] and words[words.index("-m") + 1] in SERVER_MODULES.get(engine, ()):
        return True
    command = SERVER_COMMANDS.get(engine)
    return command is not None and len(words) >= 2 and \
        words[-2].rsplit("/", 1)[-1] == command[0] and words[-1] == command[1]


def demo_entrypoint(entrypoint: list[str] | None) -> bool:
    return bool(entrypoint) and DEMO_MODULE in (entrypoint or [])


def table_for(engine: str, engine_flags: str | None,
              entrypoint: list[str] | None) -> FlagTable | None:
    """The table a recipe's args are checked against: the version ``engine_flags`` names, the
    newest shipped when it names none, no table for ``"none"`` (a fork's own flags) or when the
    args do not go to the engine's parser."""
    if engine_flags == "none" or not serves_engine(engine, entrypoint):
        return None
    return load(engine, engine_flags)


def walk(table: FlagTable | None, args: Sequence[str], skip_demo: bool = False) -> list[FlagUse]:
    """Each option of ``args`` with its values, consumed as argparse would: one value, none for
    a switch, every following non-option for ``+``/``*``, an optional one for ``?``. An unknown
    option keeps the non-options after it (the parser's error would stop there anyway); with no
    table every option is unknown."""
    uses: list[FlagUse] = []
    i, n = 0, len(args)
    while i < n:
        token = args[i]
        if token == "--":
            break
        if not is_option(token):
            i += 1
            continue
        name, eq, inline = token.partition("=")
        flag: Flag | None = None
        ambiguous: tuple[str, ...] = ()
        if table is not None and not (skip_demo and name.startswith(DEMO_FLAGS)):
            flag, ambiguous = table.resolve(name)
        j = i + 1
        if eq:
            values: list[tuple[int, str]] = [(i, inline)]
        else:
            values = []
            nargs = flag.nargs if flag is not None else "*"
            if nargs in (None, "?"):
                if j < n and not is_option(args[j]):
                    values, j = [(j, args[j])], j + 1
            elif nargs in ("+", "*"):
                while j < n and not is_option(args[j]) and args[j] != "--":
                    values.append((j, args[j]))
                    j += 1
            elif isinstance(nargs, int):
                while j < n and len(values) < nargs and not is_option(args[j]):
                    values.append((j, args[j]))
                    j += 1
        missing = flag is not None and not eq and (
            (flag.nargs is None and not values) or (flag.nargs == "+" and not values)
            or (isinstance(flag.nargs, int) and len(values) < flag.nargs))
        if not (skip_demo and name.startswith(DEMO_FLAGS)):
            uses.append(FlagUse(i, name, flag, ambiguous, tuple(values), bool(eq), missing))
        i = j
    return uses


def value_problem(flag: Flag, value: str) -> str | None:
    """What the engine's parser would refuse in ``value`` (None: it takes it): the kind of value
    (``kind``), and ``choices`` after conversion. A value holding a placeholder is filled per
    rank, so only its rank's command line can tell."""
    if "{{" in value:
        return None
    if flag.nullable and value in ("None", ""):
        return None  # vLLM's optional_type: "None" and "" give None
    converted: object = value
    try:
        if flag.kind == "int":
            converted = int(value)
        elif flag.kind == "float":
            converted = float(value)
        elif flag.kind == "json":
            json.loads(value)
        elif flag.kind == "int-like" and _INT_LIKE.fullmatch(value.strip()) is None:
            raise ValueError(value)
    except ValueError:
        return KIND_WORDS.get(flag.kind, "another kind of value")
    if flag.choices is not None and str(converted) not in flag.choices:
        shown = ", ".join(flag.choices[:12]) + (", ..." if len(flag.choices) > 12 else "")
        return f"one of {shown}"
    return None


KIND_WORDS = {"int": "an integer", "float": "a number", "json": "JSON",
              "int-like": "an integer (such as 4096, 4k or 2M)"}
