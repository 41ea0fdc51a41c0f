"""Small text helpers shared by the widgets: durations, progress bars, check marks, and the
component classes that colour a rank state.

Colours are the theme's, through each widget's ``COMPONENT_CLASSES`` (Textual resolves them and
restyles on a theme change): a widget styles Rich text with ``ink(widget, name)``.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.style import Style
from textual.widget import Widget

from sparktui.core.ranks import RankState
from sparktui.core.rankstate import assert_never, by_state
from sparktui.core.units import format_bytes

MUTED = "$foreground 60%"
"""Muted text: the foreground at 60 % over the surface, as every panel drew it (Textual's own
``$text-muted`` is ``auto 60%``, a contrast colour: another shade). A component over another
background (the log bar, the rank detail on ``$panel``) also says ``background: $surface`` so
the shade is the same; ``ink`` keeps only the colour."""



def muted_css(text: str) -> str:
    """CSS in which ``$muted`` is ``MUTED`` (no theme defines such a variable)."""
    return text.replace("$muted", MUTED)


def _state_color(state: RankState) -> str:
    match state:
        case "ready":
            return "$success"
        case "failed" | "wedged":
            return "$error"
        case "booting" | "creating":
            return "$warning"
        case "restarting":
            return "$accent"
        case "staging":
            return "$primary"
        case "queued":
            return "$secondary"
        case "stopped" | "pending":
            return MUTED
        case _:
            assert_never(state)


STATE_COLOR: dict[RankState, str] = by_state(_state_color)
"""The colour of each rank state (ready and failed also bold); total, as mypy proves."""
STATE_BOLD: frozenset[RankState] = frozenset({"failed", "ready", "wedged"})


def state_classes(prefix: str) -> set[str]:
    """A widget's component classes for the rank states: ``{prefix}--ready``, ..."""
    return {f"{prefix}--{state}" for state in STATE_COLOR}


def state_css(prefix: str, *, surface: bool = False) -> str:
    """CSS rules for ``state_classes(prefix)`` (``surface``: the widget is not on ``$surface``)."""
    under = " background: $surface;" if surface else ""
    return "\n".join(
        f"& > .{prefix}--{state} {{ color: {color};{under}"
        f"{' text-style: bold;' if state in STATE_BOLD else ''} }}"
        for state, color in STATE_COLOR.items())


def ink(widget: Widget, name: str) -> Style:
    """Component ``name``'s colour and text style, without its background: text drawn on rows
    whose background the widget paints itself (a table's cursor row, the log bar)."""
    style = widget.get_component_rich_style(name)
    return Style(color=style.color, bold=style.bold, italic=style.italic)


def palette(widget: Widget) -> tuple[Style, ...]:
    """Every component style of ``widget``: text built with them is built again when this
    changes (another theme), not at every style update (focus moves update styles too)."""
    return tuple(ink(widget, name) for name in sorted(widget.COMPONENT_CLASSES))


def uptime(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def eta(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "--:--"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def bar(fraction: float, width: int = 6) -> str:
    """``████░░``: a fixed-width bar in eighths."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part and full < width else ""
    return ("█" * full + partial).ljust(width, "░")[:width]


def rate(bytes_per_s: float) -> str:
    return f"{format_bytes(bytes_per_s)}/s" if bytes_per_s > 0 else "-"


def checks_text(summary: Mapping[str, int]) -> tuple[str, RankState]:
    """``11/11 ✓``, ``4/6 …`` or ``3/6 ✗1``, and the state it shows (for colour)."""
    total = sum(summary.values())
    passed, failed = summary.get("passed", 0), summary.get("failed", 0)
    if total == 0:
        return "-", "pending"
    if failed:
        return f"{passed}/{total} ✗{failed}", "failed"
    if passed == total:
        return f"{passed}/{total} ✓", "ready"
    return f"{passed}/{total} …", "booting"
