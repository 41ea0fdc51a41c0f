"""Input limits for recipe and cluster files, so hostile or broken input answers with a sentence
in well under a second instead of hanging or blowing the stack.

Each limit sits far above anything a real recipe or cluster file needs (the seed recipe is 5 KB,
4 levels deep, its longest string 300 characters) and far below what costs time or memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MAX_FILE_BYTES = 256 * 1024
"""A recipe or cluster file larger than 256 KiB is refused before it is parsed (parsing and
locating keys costs about 0.5 s per MiB)."""
MAX_DEPTH = 16
"""Tables and arrays nested deeper than this are refused (a recipe uses 4 levels)."""
MAX_STRING = 64 * 1024
"""Characters in one string value or key (an env value may hold a JSON blob; not a novel)."""
MAX_ITEMS = 10_000
"""Entries in one array or table (args, env, mounts, nodes, checks)."""
MAX_NODES = 256
"""``required_nodes`` and the nodes of a cluster file: one container per node, SSH to each."""
MAX_TP = 4096
"""``tensor_parallel_size``: staging plans a row slice per TP rank."""
MAX_SECONDS = 30 * 24 * 3600.0
"""Durations (boot timeout, watchdog window) beyond 30 days are a typo."""
MAX_BYTES = 1 << 60
"""Sizes (``min_free``, ``shm_size``) beyond an exbibyte are a typo."""


def _walk(data: Any) -> Iterator[tuple[tuple[str | int, ...], Any, int]]:
    """Every value with its key path and depth, without recursion (no stack to blow)."""
    stack: list[tuple[tuple[str | int, ...], Any, int]] = [((), data, 0)]
    while stack:
        path, value, depth = stack.pop()
        yield path, value, depth
        if depth > MAX_DEPTH:
            continue  # reported by the caller; its children need not be visited
        if isinstance(value, dict):
            stack.extend(((*path, str(k)), v, depth + 1) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(((*path, i), v, depth + 1) for i, v in reversed(list(enumerate(value))))


def data_problems(data: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """``(key path, sentence)`` for each place parsed TOML goes past a limit; at most one per
    kind of limit, so a million long strings give one line, not a million."""
    found: dict[str, tuple[tuple[str | int, ...], str]] = {}
    for path, value, depth in _walk(data):
        if depth > MAX_DEPTH and "depth" not in found:
            found["depth"] = (path[:MAX_DEPTH], f"nested more than {MAX_DEPTH} levels deep; a "
                              "recipe or cluster file needs at most a few")
        if isinstance(value, str) and len(value) > MAX_STRING and "string" not in found:
            found["string"] = (path, f"a string of {len(value):,} characters; at most "
                               f"{MAX_STRING:,} are read")
        if isinstance(value, (dict, list)) and len(value) > MAX_ITEMS and "items" not in found:
            found["items"] = (path, f"{len(value):,} entries; at most {MAX_ITEMS:,} are read")
        if isinstance(value, dict) and "key" not in found:
            long = next((k for k in value if len(k) > MAX_STRING), None)
            if long is not None:
                found["key"] = (path, f"a key of {len(long):,} characters; at most "
                                f"{MAX_STRING:,} are read")
        if len(found) == 4:
            break
    return list(found.values())


def text_depth_line(text: str) -> int | None:
    """The line where brackets in ``text`` first open deeper than ``MAX_DEPTH`` (for a file the
    TOML parser could not even read: its own recursion gave up). Strings are skipped roughly;
    this only has to find the line, not to parse."""
    depth = 0
    line = 1
    quote = ""
    for ch in text:
        if ch == "\n":
            line += 1
            if quote in ('"', "'"):
                quote = ""
            continue
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None
