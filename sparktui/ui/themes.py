"""Theme files: ``themes/*.toml`` of the project and the user's ``<config>/themes/*.toml``.

A theme file holds Textual's theme colours (``primary``, ``background``, ...), the per-rank log
colours as ``rank_colors = [...]`` and optional Textual variables in a ``[variables]`` table.
Rank colours become the variables ``rank-color-0`` ... so CSS can use them too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from textual.color import Color, ColorParseError
from textual.theme import Theme

from sparktui.config import config_dir, shipped

DEFAULT_THEME = "sparktui-dark"
SHIPPED_THEMES = shipped("themes")
RANK_COLOR_VARIABLE = "rank-color-{}"
RANK_COLORS_KEY = "rank-colors"  # how many rank colours the theme defines

# Used by themes that define no rank colours (Textual's own themes, for instance).
FALLBACK_RANK_COLORS = ("#56b6f7", "#f0a050", "#8fd16a", "#c792ea", "#f27983", "#4fd6be",
                        "#e8c35a", "#82aaff")

_COLOR_KEYS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground",
               "background", "surface", "panel", "boost")
_KNOWN_KEYS = {*_COLOR_KEYS, "name", "dark", "luminosity_spread", "text_alpha", "rank_colors",
               "variables"}


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class LoadedThemes:
    themes: list[Theme]
    problems: list[str]


def theme_dirs() -> list[Path]:
    """Shipped themes first, then the user's (a user theme with the same name wins)."""
    return [SHIPPED_THEMES, config_dir() / "themes"]


def _color(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise ThemeFileError(f"{where}: expected a colour string such as \"#4fa3f7\"")
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ThemeFileError(f"{where}: {exc}") from None
    return value


def theme_from_data(data: Mapping[str, Any], default_name: str, where: str = "<theme>") -> Theme:
    """A Textual ``Theme`` from a theme file's parsed TOML."""
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise ThemeFileError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KNOWN_KEYS))})")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError(f"{where}: name must be a non-empty string")
    if "primary" not in data:
        raise ThemeFileError(f"{where}: primary is required")
    colors = {key: _color(f"{where}: {key}", data[key]) for key in _COLOR_KEYS if key in data}
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeFileError(f"{where}: dark must be true or false")
    variables: dict[str, str] = {}
    raw_vars = data.get("variables", {})
    if not isinstance(raw_vars, dict):
        raise ThemeFileError(f"{where}: [variables] must be a table")
    for key, value in raw_vars.items():
        if not isinstance(value, (str, int, float)):
            raise ThemeFileError(f"{where}: variables.{key}: expected a string")
        variables[str(key)] = str(value)
    rank_colors = data.get("rank_colors", [])
    if not isinstance(rank_colors, list):
        raise ThemeFileError(f"{where}: rank_colors must be a list of colours")
    for i, value in enumerate(rank_colors):
        variables[RANK_COLOR_VARIABLE.format(i)] = _color(f"{where}: rank_colors[{i}]", value)
    if rank_colors:
        variables[RANK_COLORS_KEY] = str(len(rank_colors))
    extra: dict[str, float] = {}
    for key in ("luminosity_spread", "text_alpha"):
        if key in data:
            if not isinstance(data[key], (int, float)) or isinstance(data[key], bool):
                raise ThemeFileError(f"{where}: {key} must be a number")
            extra[key] = float(data[key])
    theme = Theme(name=name.strip(), primary=colors["primary"], secondary=colors.get("secondary"),
                  warning=colors.get("warning"), error=colors.get("error"), success=colors.get("success"),
                  accent=colors.get("accent"), foreground=colors.get("foreground"),
                  background=colors.get("background"), surface=colors.get("surface"),
                  panel=colors.get("panel"), boost=colors.get("boost"), dark=dark, variables=variables)
    for key, number in extra.items():
        setattr(theme, key, number)
    return theme


def load_theme_file(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThemeFileError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ThemeFileError(f"{path}: {exc}") from None
    return theme_from_data(data, path.stem, str(path))


def load_themes(dirs: Iterable[Path] | None = None) -> LoadedThemes:
    """Every theme in ``dirs`` (default: shipped, then the user's); bad files are reported, not fatal."""
    found: dict[str, Theme] = {}
    problems: list[str] = []
    for folder in theme_dirs() if dirs is None else dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ThemeFileError as exc:
                problems.append(str(exc))
                continue
            found[theme.name] = theme
    return LoadedThemes(list(found.values()), problems)


def rank_color_defaults() -> dict[str, str]:
    """Variables for themes without rank colours (Textual's built-in themes)."""
    out = {RANK_COLOR_VARIABLE.format(i): c for i, c in enumerate(FALLBACK_RANK_COLORS)}
    out[RANK_COLORS_KEY] = str(len(FALLBACK_RANK_COLORS))
    return out


def rank_colors(variables: Mapping[str, str]) -> list[str]:
    """The rank colours of the current theme, from the app's theme variables."""
    try:
        count = int(variables.get(RANK_COLORS_KEY, "0"))
    except ValueError:
        count = 0
    colors = [variables.get(RANK_COLOR_VARIABLE.format(i), "") for i in range(count)]
    colors = [c for c in colors if c]
    return colors or list(FALLBACK_RANK_COLORS)
