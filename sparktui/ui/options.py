"""What the console was started with (the CLI's arguments, or a test's)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sparktui.config import state_dir
from sparktui.core.telemetry import DEFAULT_INTERVAL, LOW_MEMORY
from sparktui.ui.settings import DEFAULT_WINDOW


@dataclass
class ConsoleOptions:
    recipes_dirs: list[Path]
    cluster_path: Path | None = None
    state_root: Path = field(default_factory=state_dir)
    window: int = DEFAULT_WINDOW  # log lines per rank kept in memory
    telemetry_interval: float = DEFAULT_INTERVAL  # seconds between node samples
    low_memory: int = LOW_MEMORY  # warn when the head's MemAvailable falls below this
    health_interval: float | None = None  # probe a ready rank this often (None: the cluster's)
    live: bool = True  # False: never touch the cluster (snapshot tests feed messages instead)
    clock: Callable[[], float] = time.monotonic  # uptime; tests pin it
    wall_clock: Callable[[], float] = time.time  # the events view's times
    cursor_blink: bool = True
    recipe: str | None = None  # the recipe to open first (default: the last one used, else demo)
    remember: bool = True  # read and write the state file (last theme and recipe)
    metrics: tuple[str, int] | None = None  # serve sparktui's state for Prometheus here
