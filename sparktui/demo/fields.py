"""The engines' flag tables the dumps are built from (``fields.json``, written by
``scripts/demo_fields.py`` from the shipped tables) and what both engines' dumps share.

Without ``fields.json`` (a copy of the demo that lost it) each engine prints a short dump.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from .config import Config

FIELDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fields.json")


def _flag_value(kind: str, nullable: bool, text: str) -> Any:
    """The value the engine's parser makes of a flag's text (the text when it would refuse it)."""
    if nullable and text == "None":
        return None
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "json":
            return json.loads(text)
    except ValueError:
        pass
    return text


def _is_flag_token(token: str) -> bool:
    if not token.startswith("-"):
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def engine_table(engine: str) -> dict[str, Any] | None:
    """The engine's table of ``fields.json`` (its version and flags); None without it."""
    try:
        with open(FIELDS_FILE, encoding="utf-8") as f:
            table: dict[str, Any] = json.load(f)[engine]
    except (OSError, ValueError, KeyError):
        return None
    return table


def engine_fields(engine: str, argv: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """``(table version, {field: value})``: every field of the engine's table at its default,
    with the flags of ``argv`` applied as its parser would; None without ``fields.json``."""
    table = engine_table(engine)
    if table is None:
        return None
    return table["version"], table_fields(table, argv)


def table_fields(table: dict[str, Any], argv: Sequence[str]) -> dict[str, Any]:
    """``engine_fields`` of a table already read (vLLM's dump wants it twice: the defaults too)."""
    values: dict[str, Any] = {}
    options: dict[str, list[Any]] = {}
    for flag in table["flags"]:
        opts, dest, _kind, _nargs, _neg, _null, default = flag
        values.setdefault(dest, default)
        for o in opts:
            options[o] = flag
    i = 0
    while i < len(argv):
        name, eq, inline = argv[i].partition("=")
        flag = options.get(name)
        i += 1
        if flag is None:
            continue
        _opts, dest, kind, nargs, negatable, nullable, _default = flag
        if nargs == 0:
            values[dest] = not (negatable and name.startswith("--no-") and not dest.startswith("no_"))
            continue
        texts = [inline] if eq else []
        while not eq and i < len(argv) and not _is_flag_token(argv[i]):
            texts.append(argv[i])
            i += 1
            if nargs not in ("+", "*"):
                break
        items = [_flag_value(kind, nullable, t) for t in texts]
        values[dest] = items if nargs in ("+", "*") else (items[0] if items else None)
    return values


def dump_changes(rank: int, env: dict[str, str] | None = None) -> tuple[dict[str, Any], set[str]]:
    """``SPARKTUI_DEMO_CLAMP`` and ``SPARKTUI_DEMO_DROP`` for this rank: fields to print with
    another value, fields to leave out."""
    environ = os.environ if env is None else env
    clamp: dict[str, Any] = {}
    drop: set[str] = set()
    for key, into in (("SPARKTUI_DEMO_CLAMP", clamp), ("SPARKTUI_DEMO_DROP", drop)):
        for item in environ.get(key, "").split(","):
            item, _at, where = item.strip().partition("@")
            if not item or (where and where.strip() != str(rank)):
                continue
            if isinstance(into, dict):
                field, _eq, text = item.partition("=")
                into[field.strip()] = _flag_value("json", True, text.strip())
            else:
                into.add(item)
    return clamp, drop


def py_repr(value: Any) -> str:
    """A field as Python's repr prints it; a default the table keeps as ``{"repr": ...}``
    (an enum, a path) as it was printed."""
    if isinstance(value, dict) and set(value) == {"repr"}:
        return str(value["repr"])
    return repr(value)


def demo_switches(cfg: Config) -> dict[str, Any]:
    return {"demo_boot_seconds": cfg.boot_seconds, "demo_fail_rank": cfg.fail_rank,
            "demo_fail_after": cfg.fail_after, "demo_stall": cfg.stall, "demo_flood": cfg.flood,
            "demo_tick": cfg.tick, "demo_hang_rank": cfg.hang_rank}


def credentials(cfg: Config) -> dict[str, str]:
    """The API key and HF token this rank was given (``--api-key``, ``--hf-token`` or
    ``HF_TOKEN``), which the real engines print among their arguments at boot: a launcher must
    keep them out of its logs."""
    found: dict[str, str] = {}
    for i, arg in enumerate(cfg.ignored):
        flag, eq, value = arg.partition("=")
        if flag in ("--api-key", "--hf-token"):
            value = value if eq else (cfg.ignored[i + 1] if i + 1 < len(cfg.ignored) else "")
            found[flag[2:].replace("-", "_")] = value
    if "hf_token" not in found and os.environ.get("HF_TOKEN"):
        found["hf_token"] = os.environ["HF_TOKEN"]
    return found
