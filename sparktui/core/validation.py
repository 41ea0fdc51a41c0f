"""Turn pydantic's validation errors into sentences that name the key, the line and a fix."""

from __future__ import annotations

import difflib
import inspect
import types
from collections.abc import Callable
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from sparktui.core.problems import Problem
from sparktui.core.redact import MASK
from sparktui.core.tomlsource import KeyPath, TomlSource, format_key


class StrictModel(BaseModel):
    """Unknown keys are errors and nothing is coerced: ``port = "30000"`` is a mistake."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


_TOML_TYPES = {
    str: "a string",
    int: "an integer",
    float: "a float",
    bool: "a boolean",
    list: "an array",
    dict: "a table",
}

_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "tuple_type": "an array",
}


def toml_type(value: Any) -> str:
    for t, name in _TOML_TYPES.items():
        if type(value) is t:
            return name
    return f"a {type(value).__name__}"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType or origin is not None:
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def known_keys(model: type[BaseModel], path: KeyPath) -> list[str]:
    """The keys the schema allows in the table at ``path``."""
    current: type[BaseModel] | None = model
    for comp in path:
        if current is None:
            return []
        if isinstance(comp, int):
            continue
        info = current.model_fields.get(comp)
        if info is None:
            return []
        current = _model_in(info.annotation)
    return list(current.model_fields) if current is not None else []


def suggest(word: str, choices: list[str]) -> str | None:
    best = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not best:
        lowered = {c.lower(): c for c in choices}
        if word.lower() in lowered:
            return lowered[word.lower()]
    return best[0] if best else None


def _data_path(data: Any, loc: tuple[str | int, ...], missing: bool) -> KeyPath:
    """Keep the components of pydantic's ``loc`` that are real keys; drop union tags."""
    out: list[str | int] = []
    node = data
    for i, comp in enumerate(loc):
        in_table = isinstance(node, dict) and isinstance(comp, str) and comp in node
        in_array = isinstance(node, list) and isinstance(comp, int) and 0 <= comp < len(node)
        if in_table or in_array:
            out.append(comp)
            node = node[comp]
        elif missing and i == len(loc) - 1 and isinstance(comp, str):
            out.append(comp)
        # anything else is a union member tag ("str", "CheckSpec", ...): not a key
    return tuple(out)


def problems_from(exc: ValidationError, source: TomlSource, model: type[BaseModel],
                  secret: Callable[[KeyPath], bool] | None = None) -> list[Problem]:
    """One problem per key path, in file order, with "did you mean" for misspelt keys. A value
    at a path ``secret`` says holds a secret is never quoted."""
    by_path: dict[KeyPath, Problem] = {}
    for err in exc.errors(include_url=False):
        kind = err["type"]
        loc = tuple(err["loc"])
        path = _data_path(source.data, loc, missing=(kind == "missing"))
        if kind == "extra_forbidden":
            key = str(path[-1]) if path else str(loc[-1])
            allowed = known_keys(model, path[:-1])
            hint = suggest(key, allowed)
            msg = f"unknown key {key!r}"
            msg += f"; did you mean {hint!r}?" if hint else f"; allowed keys: {', '.join(allowed)}"
        elif kind == "missing":
            msg = f"missing required key {str(path[-1])!r}" if path else "missing required key"
        elif kind in _EXPECTED:
            msg = f"expected {_EXPECTED[kind]}, found {toml_type(err.get('input'))} {err.get('input')!r}"
        elif kind == "literal_error":
            expected = (err.get("ctx") or {}).get("expected", "")
            value = err.get("input")
            msg = f"must be one of {expected}; found {value!r}"
            if isinstance(value, str):
                options = [o.strip().strip("'\"") for o in str(expected).replace(" or ", ",").split(",")]
                hint = suggest(value, [o for o in options if o])
                if hint:
                    msg += f"; did you mean {hint!r}?"
        elif kind == "value_error":
            msg = str(err["msg"]).removeprefix("Value error, ")
        else:
            msg = str(err["msg"])
        if path in by_path:
            continue  # one sentence per key: the first union member's complaint is enough
        if secret is not None and secret(path):
            msg = _hide(msg, err.get("input"), kind)
        by_path[path] = source.problem(path, msg)
    return sorted(by_path.values(), key=lambda p: (p.line or 0, p.column or 0, p.key or ""))


def _hide(msg: str, value: Any, kind: str) -> str:
    """``msg`` without the secret ``value`` it may quote."""
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, found {toml_type(value)} (a secret: value not shown)"
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value):
        msg = msg.replace(repr(value), MASK).replace(str(value), MASK)
    return msg


__all__ = ["StrictModel", "format_key", "known_keys", "problems_from", "suggest", "toml_type"]
