"""Sizes and durations as operators write them (docker's ``32gb``, ``55G``; ``20m``)."""

from __future__ import annotations

import re

from sparktui.core.limits import MAX_BYTES, MAX_SECONDS

_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?\s*$", re.IGNORECASE)
SIZE_PATTERN = r"^\s*\d+(\.\d+)?\s*([kKmMgGtTpP]?)([iI]?[bB])?\s*$"

MAX_UNIT_TEXT = 64
"""A size or duration longer than this is no size or duration (``1h30m``, ``55G``)."""
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s)", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_PATTERN = r"^\s*(\d+(\.\d+)?\s*(ms|h|m|s)\s*)+$"


def parse_size(text: str | int) -> int:
    """Bytes from docker's size syntax. Units are binary, as docker reads them (``1g`` = 2**30).

    ``55G``, ``55g``, ``55GB``, ``55GiB`` and ``55gb`` all mean the same; a bare number is bytes.
    """
    if isinstance(text, bool):
        raise ValueError(f"expected a size such as 55G, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"a size cannot be negative ({text})")
        if text > MAX_BYTES:
            raise ValueError(f"size {text} is beyond any disk (at most 1 EiB)")
        return text
    m = _SIZE_RE.match(text) if len(text) <= MAX_UNIT_TEXT else None
    if not m:
        raise ValueError(
            f"bad size {text[:40]!r}: write a number with an optional unit k, m, g, t or p "
            "(binary, as docker reads them), for example 55G or 32gb"
        )
    number, unit, _suffix = m.groups()
    value = float(number) * _SIZE_UNITS[unit.lower()]  # inf for a number of hundreds of digits
    if not value <= MAX_BYTES:
        raise ValueError(f"size {text.strip()[:40]!r} is beyond any disk (at most 1 EiB)")
    return int(value)


def parse_duration(text: str | int | float) -> float:
    """Seconds from ``20m``, ``1h30m``, ``90s``, ``500ms`` or a bare number of seconds."""
    if isinstance(text, bool):
        raise ValueError(f"expected a duration such as 20m, got {text!r}")
    if isinstance(text, (int, float)):
        if not text > 0:
            raise ValueError(f"a duration must be positive ({text})")
        if not text <= MAX_SECONDS:
            raise ValueError(f"duration {text} s is longer than 30 days")
        return float(text)
    stripped = text.strip()
    if len(stripped) > MAX_UNIT_TEXT:  # the regex below is quadratic on a long run of digits
        raise ValueError(f"bad duration {stripped[:20]!r}... ({len(stripped)} characters): write "
                         "a number with a unit ms, s, m or h, for example 20m, 90s or 1h30m")
    if not stripped or _DURATION_RE.sub("", stripped).strip():
        raise ValueError(
            f"bad duration {text!r}: write a number with a unit ms, s, m or h, "
            "for example 20m, 90s or 1h30m"
        )
    total = sum(float(n) * _DURATION_UNITS[u.lower()] for n, u in _DURATION_RE.findall(stripped))
    if not total <= MAX_SECONDS:
        raise ValueError(f"duration {stripped[:40]!r} is longer than 30 days")
    if total <= 0:
        raise ValueError(f"a duration must be positive ({text!r})")
    return total


def format_bytes(n: float) -> str:
    """``57.0 GiB``: binary units, one decimal, the way ``min_free`` is written."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    """``20m``, ``1h30m``, ``45s``: the shortest exact spelling of whole seconds."""
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{sec}s" if sec else "")
    return out or "0s"
