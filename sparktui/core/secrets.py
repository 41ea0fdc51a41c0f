"""Secrets in env are masked on screen and in saved plans unless asked for."""

from __future__ import annotations

from collections.abc import Mapping

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
MASK = "********"


def is_secret(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret(k) and v else v) for k, v in env.items()}
