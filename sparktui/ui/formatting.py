"""Small text helpers shared by the widgets: durations, progress bars, check marks."""

from __future__ import annotations

from collections.abc import Mapping

from sparktui.core.units import format_bytes

# Theme variable for each rank state's colour.
STATE_COLOR: dict[str, str] = {
    "ready": "success", "failed": "error", "booting": "warning", "creating": "warning",
    "restarting": "accent", "staging": "primary", "stopped": "text-muted", "pending": "text-muted",
}


def state_style(state: str, variables: Mapping[str, str]) -> str:
    color = variables.get(STATE_COLOR.get(state, ""), "")
    bold = "bold " if state in ("failed", "ready") else ""
    return f"{bold}{color}".strip()


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


def checks_text(summary: Mapping[str, int]) -> tuple[str, str]:
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
