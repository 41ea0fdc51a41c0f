"""An engine version's own flag table (``flags/<engine>-<version>.json``, written from the real
parsers by ``scripts/engine_flags.py``): which flags exist, the field each sets, the kind of value
it takes. Plans are checked against it; a rank's dump of its arguments is read back through it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

FLAGS_PACKAGE = "sparktui.core.engines"
FLAGS_FOLDER = "flags"


@dataclass(frozen=True)
class Flag:
    """One option of the engine's parser."""

    options: tuple[str, ...]  # every spelling: "--tp-size", "--tensor-parallel-size"
    dest: str  # the field it sets: "tp_size"
    kind: str  # int, float, str, bool (a switch), json, int-like, other (accepted as it is)
    nullable: bool  # "None" is a value (vLLM's optional types)
    choices: tuple[str, ...] | None
    nargs: int | str | None  # argparse's: None one value, 0 a switch, "+", "*", "?"
    negatable: bool  # --x / --no-x
    default: Any  # JSON, or {"repr": "..."} where JSON does not hold it

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0


@dataclass(frozen=True)
class FlagTable:
    engine: str
    version: str
    flags: tuple[Flag, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_option", {o: f for f in self.flags for o in f.options})
        object.__setattr__(self, "_by_dest", {f.dest: f for f in reversed(self.flags)})

    def option(self, spelling: str) -> Flag | None:
        """The flag ``spelling`` (``--tp``, ``-tp``, ``--tp-size=4``'s ``--tp-size``) names."""
        found: Flag | None = self._by_option.get(spelling)  # type: ignore[attr-defined]
        return found

    def field(self, dest: str) -> Flag | None:
        found: Flag | None = self._by_dest.get(dest)  # type: ignore[attr-defined]
        return found


def versions(engine: str) -> list[str]:
    """The versions whose table ships, oldest first."""
    folder = resources.files(FLAGS_PACKAGE).joinpath(FLAGS_FOLDER)
    found = [p.name[len(engine) + 1:-5] for p in folder.iterdir()
             if p.name.startswith(engine + "-") and p.name.endswith(".json")]
    return sorted(found, key=lambda v: [int(x) if x.isdigit() else x for x in v.split(".")])


@cache
def load(engine: str, version: str | None = None) -> FlagTable | None:
    """The table of ``engine`` at ``version`` (the newest shipped when None); None if none ships."""
    known = versions(engine)
    if version is None:
        if not known:
            return None
        version = known[-1]
    if version not in known:
        return None
    path = resources.files(FLAGS_PACKAGE).joinpath(FLAGS_FOLDER, f"{engine}-{version}.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    flags = tuple(
        Flag(tuple(f["options"]), f["dest"], f["kind"], bool(f.get("nullable")),
             tuple(f["choices"]) if f["choices"] is not None else None, f["nargs"],
             bool(f["negatable"]), f["default"])
        for f in data["flags"])
    return FlagTable(data["engine"], data["version"], flags)
