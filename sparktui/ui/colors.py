"""Theme variables as Rich colours: ``$text-muted`` is ``auto 60%`` in CSS, ``#8a8f98`` here."""

from __future__ import annotations

from collections.abc import Mapping

from textual.color import Color, ColorParseError

NAMES = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background",
         "surface", "panel", "text-muted", "text-primary", "text-accent")

_cache: tuple[tuple[str | None, ...], dict[str, str]] | None = None


def _resolve(variables: Mapping[str, str], value: str) -> str | None:
    parts = value.split()
    if not parts:
        return None
    try:
        base = Color.parse(variables.get("foreground", "#e0e0e0")) if parts[0] == "auto" \
            else Color.parse(parts[0])
        if len(parts) > 1 and parts[1].endswith("%"):
            under = Color.parse(variables.get("surface") or variables.get("background") or "#000000")
            base = under.blend(base, float(parts[1][:-1]) / 100)
    except (ColorParseError, ValueError):
        return None
    if base.ansi is not None:  # Textual's ANSI themes: "ansi_green" is no colour to Rich
        return "default" if base.ansi < 0 else f"color({base.ansi})"
    return base.hex6  # Rich reads no alpha


def theme_colors(variables: Mapping[str, str]) -> dict[str, str]:
    """Concrete colours for the theme variables the widgets style Rich text with."""
    global _cache
    key = tuple(variables.get(name) for name in NAMES)
    if _cache is not None and _cache[0] == key:
        return _cache[1]
    out: dict[str, str] = {}
    for name in NAMES:
        value = variables.get(name)
        resolved = _resolve(variables, value) if value else None
        if resolved:
            out[name] = resolved
    _cache = (key, out)
    return out
