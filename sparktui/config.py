"""Where sparktui finds recipes, the cluster file, themes and its run state on this machine."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from sparktui.core.cluster import Cluster, default_cluster_path, load_cluster, local_cluster

APP = "sparktui"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP, appauthor=False))


def state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP, appauthor=False))


def recipes_dirs(explicit: Path | None = None) -> list[Path]:
    """``--recipes``, else ``$SPARKTUI_RECIPES``, ``./recipes``, the user's and the shipped ones."""
    if explicit is not None:
        return [explicit]
    found: list[Path] = []
    env = os.environ.get("SPARKTUI_RECIPES")
    candidates = [Path(env)] if env else []
    candidates += [Path.cwd() / "recipes", config_dir() / "recipes", PROJECT_ROOT / "recipes"]
    for c in candidates:
        resolved = c.expanduser().resolve()
        if resolved.is_dir() and resolved not in found:
            found.append(resolved)
    return found


def resolve_cluster(explicit: Path | None, nodes_needed: int) -> Cluster:
    """``--cluster``, else ``$SPARKTUI_CLUSTER``, else the user's cluster.toml, else local."""
    path = explicit or default_cluster_path(config_dir())
    if path is None:
        return local_cluster(nodes_needed)
    return load_cluster(path)
