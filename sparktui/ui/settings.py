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

The file is read through strict models, as recipes are (``core.validation``): an unknown key or
binding id, or a value of the wrong kind, is a ``Problem`` naming the file, the line and the key
(with a did-you-mean); the console reports each and applies the rest, ``sparktui validate``
reports them and fails. Each setting may also come from the environment, which wins over the
file: ``SPARKTUI_THEME``, ``SPARKTUI_LOGS__WINDOW``, ``SPARKTUI_TELEMETRY__INTERVAL``,
``SPARKTUI_TELEMETRY__LOW_MEMORY``, ``SPARKTUI_HEALTH__INTERVAL`` (a table's key after two
underscores, as posting names its ``POSTING_`` variables); key bindings only from the file.

``<config>/state.json`` is written by the console: the last theme and recipe chosen.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError

from sparktui.config import config_dir
from sparktui.core.cluster import HEALTH_BOOTING_S
from sparktui.core.errors import ConfigError
from sparktui.core.private import private_dir, write_private
from sparktui.core.problems import Problem
from sparktui.core.recipe import Duration, Size
from sparktui.core.telemetry import DEFAULT_INTERVAL, LOW_MEMORY
from sparktui.core.tomlsource import TomlSource, read_toml
from sparktui.core.units import parse_duration, parse_size
from sparktui.core.validation import StrictModel, problems_from, suggest

DEFAULT_WINDOW = 10_000
MIN_WINDOW = 100
MIN_TELEMETRY_S = 0.5
ENV_PREFIX = "SPARKTUI_"


def _key(value: str) -> str:
    if not value.strip():
        raise ValueError('write the key as a string, for example "R" or "ctrl+r"')
    return value.strip()


def _health_interval(value: str | int) -> str | int:
    if parse_duration(value) < HEALTH_BOOTING_S:
        raise ValueError(f"must be at least {HEALTH_BOOTING_S:g}s (a booting rank is probed "
                         "this often)")
    return value


KeyText = Annotated[str, AfterValidator(_key)]


class LogsSettings(StrictModel):
    window: int = Field(default=DEFAULT_WINDOW, ge=MIN_WINDOW,
                        description="Lines per rank kept in memory, and grep matches shown (the "
                                    "run's files keep every line)")


class TelemetrySettings(StrictModel):
    interval: Duration = Field(default=f"{DEFAULT_INTERVAL:g}s",
                               description=f"One sample per node this often (at least "
                                           f"{MIN_TELEMETRY_S:g}s)")
    low_memory: Size = Field(default=f"{LOW_MEMORY}",
                             description="Warn when the head's MemAvailable falls below this")


class HealthSettings(StrictModel):
    interval: Annotated[Duration, AfterValidator(_health_interval)] | None = Field(
        default=None, description="Probe a ready rank this often (a cluster file's [health] "
                                  "wins; default 10s)")


class ConfigFile(StrictModel):
    """``config.toml``: every key the console reads, and nothing else."""

    theme: str | None = Field(default=None, description="The theme to start with (the last one "
                                                        "chosen in the console wins)")
    keys: dict[str, KeyText] = Field(default_factory=dict,
                                     description="Binding id -> key(s), comma-separated (the "
                                                 "help screen, ?, lists the ids)")
    logs: LogsSettings = Field(default_factory=LogsSettings, description="The log panel")
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings,
                                         description="Node samples")
    health: HealthSettings = Field(default_factory=HealthSettings, description="Health probes")


@dataclass
class Settings:
    keys: dict[str, str] = field(default_factory=dict)
    theme: str | None = None
    window: int = DEFAULT_WINDOW
    interval: float = DEFAULT_INTERVAL
    low_memory: int = LOW_MEMORY
    health_interval: float | None = None  # None: the cluster's, else 10 s
    problems: list[Problem] = field(default_factory=list)


def config_path(folder: Path | None = None) -> Path:
    return (folder or config_dir()) / "config.toml"


def state_path(folder: Path | None = None) -> Path:
    return (folder or config_dir()) / "state.json"


def binding_ids() -> list[str]:
    """Every id ``[keys]`` may remap: those of the bindings of the app and of every screen and
    widget of the console (found, so a new dialog's ids are known at once)."""
    import importlib
    import inspect
    import pkgutil

    from textual.binding import Binding
    from textual.dom import DOMNode

    from sparktui.ui import screens, widgets

    modules = ["sparktui.ui.app"]
    for package in (screens, widgets):
        modules += [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    ids: list[str] = []
    for name in modules:
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__ == name:
                ids += [b.id for b in cls.BINDINGS if isinstance(b, Binding) and b.id]
    return list(dict.fromkeys(ids))


def load_settings(folder: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """config.toml, then the ``SPARKTUI_`` variables over it; every problem is reported (file,
    line, key) and the rest still applies."""
    path = config_path(folder)
    problems: list[Problem] = []
    source: TomlSource | None = None
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            source = read_toml(path, ConfigError)
        except ConfigError as exc:
            problems += exc.problems
        else:
            data = source.data
    config = _validate(data, source, problems)
    keys = _bindings(config.keys, source, problems)
    for table, key, value in _environment(os.environ if environ is None else environ, problems):
        config = _override(config, table, key, value, problems)
    return Settings(keys=keys, theme=config.theme, window=config.logs.window,
                    interval=max(MIN_TELEMETRY_S, parse_duration(config.telemetry.interval)),
                    low_memory=parse_size(config.telemetry.low_memory),
                    health_interval=(parse_duration(config.health.interval)
                                     if config.health.interval is not None else None),
                    problems=problems)


def _validate(data: dict[str, Any], source: TomlSource | None, problems: list[Problem]) -> ConfigFile:
    """The file's settings: what is wrong is reported and left out, the rest kept."""
    data = copy.deepcopy(data)  # what is wrong is cut out of it
    src = source if source is not None else TomlSource(data=data, text="")
    for _ in range(100):  # each round cuts out at least one key
        try:
            return ConfigFile.model_validate(data)
        except ValidationError as exc:
            problems += [p for p in problems_from(exc, src, ConfigFile) if p not in problems]
            if not any(_cut(data, tuple(err["loc"])) for err in exc.errors()):
                break
    return ConfigFile()


def _cut(data: dict[str, Any], loc: tuple[str | int, ...]) -> bool:
    """Remove the deepest key of ``loc`` that ``data`` holds; False when it holds none."""
    node: Any = data
    parent: dict[str, Any] | None = None
    last: str | None = None
    for comp in loc:
        if isinstance(node, dict) and isinstance(comp, str) and comp in node:
            parent, last, node = node, comp, node[comp]
        else:
            break
    if parent is None or last is None:
        return False
    del parent[last]
    return True


_TABLES = {name: info.annotation for name, info in ConfigFile.model_fields.items()
           if name not in ("theme", "keys")}


def _environment(environ: Mapping[str, str], problems: list[Problem]
                 ) -> list[tuple[str, str | None, Any]]:
    """``(table, key, value)`` for each ``SPARKTUI_`` setting (``key`` None for a top-level
    one); a variable that names a table but no key of it is a problem."""
    found: list[tuple[str, str | None, Any]] = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX):].lower()
        value: Any = environ[name]
        if rest == "theme":
            found.append(("theme", None, value))
            continue
        table, sep, key = rest.partition("__")
        if not sep or table not in _TABLES:
            continue  # SPARKTUI_CLUSTER and the like: not settings
        model = _TABLES[table]
        assert isinstance(model, type) and issubclass(model, StrictModel)
        if key not in model.model_fields:
            hint = suggest(key, list(model.model_fields))
            known = ", ".join(f"{ENV_PREFIX}{table.upper()}__{k.upper()}" for k in model.model_fields)
            problems.append(Problem(f"no setting {table}.{key}"
                                    + (f"; did you mean {ENV_PREFIX}{table.upper()}__{hint.upper()}?"
                                       if hint else f"; the {table} settings are {known}"),
                                    file=f"${name}"))
            continue
        if model.model_fields[key].annotation is int:
            with contextlib.suppress(ValueError):  # else the model says what it expects
                value = int(value)
        found.append((table, key, value))
    return found


def _override(config: ConfigFile, table: str, key: str | None, value: Any,
              problems: list[Problem]) -> ConfigFile:
    """``config`` with one variable's value; when the value is wrong, as it was (the file's
    value or the default) and a problem naming the variable."""
    trial = config.model_dump()
    if key is None:
        trial[table] = value
    else:
        trial[table][key] = value
    try:
        return ConfigFile.model_validate(trial)
    except ValidationError as exc:
        var = f"${ENV_PREFIX}{table.upper()}" + (f"__{key.upper()}" if key is not None else "")
        problems += [p.at(var) for p in problems_from(exc, TomlSource(data=trial, text=""), ConfigFile)]
        return config


def _bindings(keys: dict[str, str], source: TomlSource | None, problems: list[Problem]
              ) -> dict[str, str]:
    """The remaps whose binding id exists; each other one is a problem with a did-you-mean."""
    if not keys:
        return {}
    known = binding_ids()
    good: dict[str, str] = {}
    for binding_id, key in keys.items():
        if binding_id in known:
            good[binding_id] = key
            continue
        hint = suggest(binding_id, known)
        message = f"unknown binding id {binding_id!r}"
        message += f"; did you mean {hint!r}?" if hint else "; the help screen (?) lists the ids"
        problems.append(source.problem(("keys", binding_id), message) if source is not None
                        else Problem(message, key=f"keys.{binding_id}"))
    return good


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
