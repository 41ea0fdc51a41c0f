"""The console's user settings and remembered state.

``<config>/config.toml`` (platformdirs' user config dir, ``~/.config/sparktui`` on Linux)::

    theme = "sparktui-light"      # the theme to start with (the last one chosen wins)
    [keys]                        # binding id -> key(s), see the help screen (?) for the ids
    restart = "R"
    grep = "slash,ctrl+f"
    [logs]
    window = 10000                # lines per rank kept in memory, and grep matches (the run's files keep all)
    [telemetry]
    interval = "2s"               # one sample per node this often
    low_memory = "8G"             # warn when the head's MemAvailable falls below this
    [health]
    interval = "10s"              # probe a ready rank this often (a cluster file's [health] wins)

``<config>/state.json`` is written by the console: the last theme and recipe chosen.
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from sparktui.config import config_dir
from sparktui.core.cluster import HEALTH_BOOTING_S
from sparktui.core.private import private_dir, write_private
from sparktui.core.telemetry import DEFAULT_INTERVAL, LOW_MEMORY
from sparktui.core.units import parse_duration, parse_size

DEFAULT_WINDOW = 10_000
MIN_WINDOW = 100


@dataclass
class Settings:
    keys: dict[str, str] = field(default_factory=dict)
    theme: str | None = None
    window: int = DEFAULT_WINDOW
    interval: float = DEFAULT_INTERVAL
    low_memory: int = LOW_MEMORY
    health_interval: float | None = None  # None: the cluster's, else 10 s
    problems: list[str] = field(default_factory=list)


def config_path(folder: Path | None = None) -> Path:
    return (folder or config_dir()) / "config.toml"


def state_path(folder: Path | None = None) -> Path:
    return (folder or config_dir()) / "state.json"


def load_settings(folder: Path | None = None) -> Settings:
    """Read config.toml; every problem is reported as a sentence and the rest still applies."""
    path = config_path(folder)
    settings = Settings()
    if not path.is_file():
        return settings
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        settings.problems.append(f"{path}: {exc}")
        return settings
    theme = data.get("theme")
    if theme is not None:
        if isinstance(theme, str):
            settings.theme = theme
        else:
            settings.problems.append(f"{path}: theme must be a theme name")
    keys = data.get("keys", {})
    if isinstance(keys, dict):
        for binding_id, key in keys.items():
            if isinstance(key, str) and key.strip():
                settings.keys[str(binding_id)] = key.strip()
            else:
                settings.problems.append(f"{path}: keys.{binding_id}: write the key as a string, "
                                         "for example \"R\" or \"ctrl+r\"")
    else:
        settings.problems.append(f"{path}: [keys] must be a table of binding id = key")
    logs = data.get("logs", {})
    window = logs.get("window") if isinstance(logs, dict) else None
    if window is not None:
        if isinstance(window, int) and not isinstance(window, bool) and window >= MIN_WINDOW:
            settings.window = window
        else:
            settings.problems.append(f"{path}: logs.window must be a whole number of lines, "
                                     f"at least {MIN_WINDOW}")
    telemetry = data.get("telemetry", {})
    if isinstance(telemetry, dict):
        try:
            if "interval" in telemetry:
                settings.interval = max(0.5, parse_duration(telemetry["interval"]))
            if "low_memory" in telemetry:
                settings.low_memory = parse_size(telemetry["low_memory"])
        except (ValueError, TypeError) as exc:
            settings.problems.append(f"{path}: [telemetry]: {exc}")
    health = data.get("health", {})
    if isinstance(health, dict) and "interval" in health:
        try:
            interval = parse_duration(health["interval"])
        except (ValueError, TypeError) as exc:
            settings.problems.append(f"{path}: [health]: {exc}")
        else:
            if interval >= HEALTH_BOOTING_S:
                settings.health_interval = interval
            else:
                settings.problems.append(f"{path}: [health]: interval must be at least "
                                         f"{HEALTH_BOOTING_S:g}s")
    return settings


def load_state(folder: Path | None = None) -> dict[str, Any]:
    try:
        data = json.loads(state_path(folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(updates: dict[str, Any], folder: Path | None = None) -> None:
    """Merge ``updates`` into state.json, atomically; a read-only config dir is not an error."""
    path = state_path(folder)
    state = {**load_state(folder), **updates}
    with contextlib.suppress(OSError):
        write_private(private_dir(path.parent) / path.name, json.dumps(state, indent=2) + "\n")
