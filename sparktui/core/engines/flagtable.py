"""An engine version's own flag table (``flags/<engine>-<version>.json``, written from the real
parsers by ``scripts/engine_flags.py``): which flags exist, the field each sets, the kind of value
it takes. Plans are checked against it; a rank's dump of its arguments is read back through it."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

FLAGS_PACKAGE = "sparktui.core.engines"
FLAGS_FOLDER = "flags"
ENGINE_LABELS = {"sglang": "SGLang", "vllm": "vLLM"}
UNDERSCORE_ENGINES = ("vllm",)  # FlexibleArgumentParser: --max_num_seqs is --max-num-seqs


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
        object.__setattr__(self, "_options", tuple(sorted(o for f in self.flags for o in f.options
                                                          if o.startswith("--"))))

    @property
    def label(self) -> str:
        """``SGLang 0.5.23``: how messages name the table."""
        return f"{ENGINE_LABELS.get(self.engine, self.engine)} {self.version}"

    @property
    def long_options(self) -> tuple[str, ...]:
        """Every ``--`` spelling of every flag, sorted."""
        options: tuple[str, ...] = self._options  # type: ignore[attr-defined]
        return options

    def option(self, spelling: str) -> Flag | None:
        """The flag ``spelling`` (``--tp``, ``-tp``, ``--tp-size=4``'s ``--tp-size``) names."""
        found: Flag | None = self._by_option.get(spelling)  # type: ignore[attr-defined]
        return found

    def resolve(self, spelling: str) -> tuple[Flag | None, tuple[str, ...]]:
        """The flag the engine's parser takes ``spelling`` (no ``=value``) for, as argparse does:
        the exact option, else the one option it is a prefix of (both parsers keep argparse's
        ``allow_abbrev``; Python 3.11's argparse refuses a prefix of two options even of one
        flag). vLLM's parser first turns ``_`` into ``-`` in a ``--`` name up to its first
        ``.`` (``--compilation-config.level`` sets a key of a JSON flag). Returns the flag, or
        None with the options an ambiguous prefix matched (empty: unknown)."""
        if self.engine in UNDERSCORE_ENGINES and spelling.startswith("--"):
            head, dot, rest = spelling[2:].partition(".")
            spelling = "--" + head.replace("_", "-")
            if dot and rest:  # a key inside a JSON flag: the flag is the head
                found = self.option(spelling)
                if found is not None:
                    return found, ()
        exact = self.option(spelling)
        if exact is not None:
            return exact, ()
        if not spelling.startswith("--") or len(spelling) < 3:
            return None, ()
        matches = self._prefixes(spelling)
        if len(matches) == 1:
            return self.option(matches[0]), ()
        return None, matches

    def _prefixes(self, spelling: str) -> tuple[str, ...]:
        options = self.long_options
        start = bisect.bisect_left(options, spelling)
        found = []
        for option in options[start:]:
            if not option.startswith(spelling):
                break
            found.append(option)
        return tuple(found)

    def field(self, dest: str) -> Flag | None:
        found: Flag | None = self._by_dest.get(dest)  # type: ignore[attr-defined]
        return found


@cache
def versions(engine: str) -> tuple[str, ...]:
    """The versions whose table ships, oldest first."""
    folder = resources.files(FLAGS_PACKAGE).joinpath(FLAGS_FOLDER)
    found = [p.name[len(engine) + 1:-5] for p in folder.iterdir()
             if p.name.startswith(engine + "-") and p.name.endswith(".json")]
    return tuple(sorted(found, key=lambda v: [int(x) if x.isdigit() else x for x in v.split(".")]))


def load(engine: str, version: str | None = None) -> FlagTable | None:
    """The table of ``engine`` at ``version`` (the newest shipped when None); None if none ships.
    Read once a process (about 9 ms for SGLang's 531 flags)."""
    known = versions(engine)
    if version is None:
        if not known:
            return None
        version = known[-1]
    if version not in known:
        return None
    return _read(engine, version)


@cache
def _read(engine: str, version: str) -> FlagTable:
    path = resources.files(FLAGS_PACKAGE).joinpath(FLAGS_FOLDER, f"{engine}-{version}.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    flags = tuple(
        Flag(tuple(f["options"]), f["dest"], f["kind"], bool(f.get("nullable")),
             tuple(f["choices"]) if f["choices"] is not None else None, f["nargs"],
             bool(f["negatable"]), f["default"])
        for f in data["flags"])
    return FlagTable(data["engine"], data["version"], flags)
