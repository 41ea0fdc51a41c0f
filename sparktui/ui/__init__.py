"""The console (TUI): ``sparktui`` with no command opens it."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from textual.theme import BUILTIN_THEMES

from sparktui.config import recipes_dirs
from sparktui.ui.gcpolicy import settle
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.settings import load_settings
from sparktui.ui.themes import load_themes

if TYPE_CHECKING:
    from sparktui.ui.app import SparkApp


def run_console(args: argparse.Namespace) -> int:
    """Open the console on the recipes folders and the configured (or local) cluster."""
    app = console_app(args)
    if isinstance(app, int):
        return app
    settle()
    app.run()
    return 0


def console_app(args: argparse.Namespace) -> SparkApp | int:
    """The console exactly as ``sparktui`` opens it (an exit code when it cannot)."""
    from sparktui.ui.app import SparkApp  # Textual loads only when the console opens

    settings = load_settings()
    themes = load_themes()
    theme = getattr(args, "theme", None)
    names = [t.name for t in themes.themes]
    if theme is not None and theme not in names and theme not in BUILTIN_THEMES:
        known = ", ".join(names) or "none found"
        print(f"sparktui: no theme named {theme!r} (sparktui's: {known}; Textual's built-in "
              "themes work too)", file=sys.stderr)
        return 2
    metrics = None
    if getattr(args, "metrics", None) is not None:
        from sparktui.backend.exporter import listen_address
        try:
            metrics = listen_address(args.metrics)
        except ValueError as exc:
            print(f"sparktui: {exc}", file=sys.stderr)
            return 2
    options = ConsoleOptions(recipes_dirs(getattr(args, "recipes", None)),
                             getattr(args, "cluster", None), window=settings.window,
                             telemetry_interval=settings.interval, low_memory=settings.low_memory,
                             health_interval=settings.health_interval, metrics=metrics)
    return SparkApp(options, theme=theme, settings=settings, themes=themes)
