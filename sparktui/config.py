"""Where sparktui finds recipes, the cluster file, themes and its run state on this machine."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sparktui.core.errors import NO_HOME, SetupError, absolute_dir

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from sparktui.core.cluster import Cluster
    from sparktui.core.plan import Plan
    from sparktui.core.recipe import Recipe

APP = "sparktui"


def shipped(name: str) -> Path:
    """A folder sparktui ships (``recipes``, ``themes``, ``schema``), found the same way in an
    installed wheel, an editable install and a source checkout: inside the package, where the
    wheel puts it (``recipes/`` and ``themes/`` are top-level folders of the repository that
    the build maps in, setup.py), else beside the package in the checkout that holds it (the
    one with ``pyproject.toml``). importlib.resources (a few ms to import on the path of
    ``sparktui logs``) only for a package that is not a folder, say a zip."""
    package = Path(__file__).parent
    inside = package / name
    if inside.is_dir():
        return inside
    checkout = package.parent
    if (checkout / name).is_dir() and (checkout / "pyproject.toml").is_file():
        return checkout / name
    from importlib.resources import files

    return Path(str(files("sparktui").joinpath(name)))


def config_dir() -> Path:
    """``SetupError`` when there is no home folder to put it in (never a literal ``~``)."""
    return _user_dir("user_config_dir", "XDG_CONFIG_HOME", ".config", "the config folder")


def state_dir() -> Path:
    """``SetupError`` when there is no home folder to put it in (never a literal ``~``)."""
    return _user_dir("user_state_dir", "XDG_STATE_HOME", ".local/state", "the state folder")


def _user_dir(function: str, variable: str, default: str, what: str) -> Path:
    """platformdirs' answer. Its plain Linux case is answered here without it: importing
    platformdirs costs about 5 ms (tempfile, random, copy) at every start, a twentieth of a
    ``sparktui logs --grep`` over a million lines; tests/core/test_config_dirs.py checks that
    both answer the same."""
    plain = _xdg_dir(variable, default)
    if plain is not None:
        return Path(plain, APP)
    import platformdirs

    try:  # platformdirs raises RuntimeError, or (older ones) answers "~/..." unexpanded
        return absolute_dir(getattr(platformdirs, function)(APP, appauthor=False), what)
    except RuntimeError:
        raise SetupError(NO_HOME) from None


def _xdg_dir(variable: str, default: str) -> str | None:
    """The XDG base folder on Linux when it is plain: ``$variable`` when absolute, else
    ``$HOME/default`` when ``HOME`` is absolute and the variable unset or empty. None for
    anything else (another system, Android, a relative value, no home), which platformdirs
    decides."""
    if sys.platform != "linux" or "ANDROID_DATA" in os.environ:
        return None
    value = os.environ.get(variable, "")
    if value.startswith("/"):
        return value
    home = os.environ.get("HOME", "")
    if value or not home.startswith("/"):
        return None
    return os.path.join(home.rstrip("/") or "/", default)


def recipes_dirs(explicit: Path | None = None) -> list[Path]:
    """``--recipes``, else ``$SPARKTUI_RECIPES``, ``./recipes``, the user's and the shipped ones.
    In a checkout's root ``./recipes`` is the shipped folder: it keeps its place, last, so the
    user's recipes hide the shipped ones there as anywhere else."""
    if explicit is not None:
        return [explicit]
    found: list[Path] = []
    env = os.environ.get("SPARKTUI_RECIPES")
    candidates = [Path(env)] if env else []
    here, own = Path.cwd() / "recipes", shipped("recipes")
    candidates += [here, config_dir() / "recipes", own]
    for c in candidates:
        resolved = c.expanduser().resolve()
        if c is here and resolved == own.resolve():
            continue
        if resolved.is_dir() and resolved not in found:
            found.append(resolved)
    return found


def resolve_cluster(explicit: Path | None, nodes_needed: int) -> Cluster:
    """``--cluster``, else ``$SPARKTUI_CLUSTER``, else the user's cluster.toml, else local."""
    from sparktui.core.cluster import default_cluster_path, load_cluster, local_cluster

    path = explicit or default_cluster_path(config_dir())
    if path is None:
        return local_cluster(nodes_needed)
    return load_cluster(path)


def cluster_plan(recipe: Recipe, cluster: Cluster, state_root: Path | None = None) -> Plan:
    """``recipe``'s plan on ``cluster``, its hash keyed by the cluster's plan key in the state
    folder (``state_root``, default ``state_dir()``; made on first use), so the hash on a
    container's label covers secrets without revealing them. The one place the CLI and the
    console build a plan, with one rule: a key that cannot be used (a state folder that
    refuses it, a key file that is no key) is a ``SetupError`` naming it, for both. A plan
    hashed without the key would show what the other one started as changed."""
    from sparktui.core.plan import build_plan
    from sparktui.core.secrets import plan_key

    root = state_root if state_root is not None else state_dir()
    try:
        key = plan_key(root, cluster.name)
    except OSError as exc:
        raise SetupError(f"cannot use the plan key of cluster {cluster.name!r}: "
                         f"{exc.strerror or exc}") from None
    return build_plan(recipe, cluster, key)
