"""``{{name}}`` placeholders in recipe strings, resolved per node and rank at plan time."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

PLACEHOLDERS: dict[str, str] = {
    "hf": "the node's Hugging Face cache folder on the host",
    "rank": "the rank number of the container (0 is the head)",
    "nnodes": "how many nodes the recipe runs on",
    "node": "the node's name in the cluster file",
    "head": "the head node's fabric address",
}

_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


def names_in(text: str) -> list[str]:
    return _RE.findall(text)


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Replace every known placeholder; unknown ones were rejected when the recipe loaded."""
    return _RE.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def walk_strings(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string value in parsed TOML data with its key path."""
    if isinstance(data, str):
        yield path, data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from walk_strings(v, (*path, str(k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from walk_strings(v, (*path, i))
