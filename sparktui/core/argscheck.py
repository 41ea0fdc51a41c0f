"""Did every flag take effect: a rank's command line held against the arguments its engine
printed at start (``core/engines/dumps``), flag by flag, through the engine's flag table.

Per flag: **took effect** (equal after the flag's text is read as its kind; for vLLM, absent
from its non-default dict because it equals the default), **differs** (both values), **unknown**
(neither the table nor the dump has its field), or, for the whole rank, **not reported** (no
dump by the end of the boot, or one that could not be read). Secret values (the plan's, and
what the engine or sparktui masked in the line) are compared where both are in clear and never
put in a verdict.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sparktui.core.engines import engine as engine_rules
from sparktui.core.engines.argv import walk
from sparktui.core.engines.dumps import ArgsDump
from sparktui.core.engines.flagtable import Flag, FlagTable, load
from sparktui.core.engines.reprread import Call, CutOff, EnumValue, Raw, ReprError
from sparktui.core.redact import MASK

Verdict = Literal["took effect", "differs", "unknown"]
ArgsMode = Literal["check", "warn", "ignore"]
ARGS_MODES: tuple[str, ...] = ("check", "warn", "ignore")

MASKS = frozenset({MASK, "***", "<redacted>", "**********"})
"""How a masked value reads in a dump: sparktui's redactor, vLLM's ``redact_sensitive_args``,
SGLang's watermark redaction."""

CONTINUED = "\u21aa "
"""How the log pump starts each piece of a line it cut at 32 KiB but the first
(``agents/local_shim.CONTINUED``): a dump longer than that arrives in pieces."""

_SHOWN = 60  # a value longer than this is cut in a verdict (a json override can be KBs)


@dataclass(frozen=True)
class FlagVerdict:
    flag: str  # as written: "--max-running-requests"
    field: str | None  # the field it sets: "max_running_requests"
    verdict: Verdict
    given: str  # the command line's value, shown (masked for a secret)
    reported: str | None  # the engine's value, shown (masked for a secret); None: absent
    note: str = ""
    expected: bool = False  # the recipe lists it in [boot] args_expected

    @property
    def failing(self) -> bool:
        return self.verdict != "took effect" and not self.expected

    def to_json(self) -> dict[str, Any]:
        return {"flag": self.flag, "field": self.field, "verdict": self.verdict,
                "given": self.given, "reported": self.reported, "note": self.note,
                "expected": self.expected}


@dataclass(frozen=True)
class ArgsReport:
    """One rank's verdicts, or why there are none (``reason``: not reported)."""

    flags: tuple[FlagVerdict, ...] = ()
    version: str | None = None  # the engine's, as it printed it (SGLang prints none)
    table: str = ""  # the flag table's version the flags were read with
    reason: str = ""  # not reported: why
    cut_off: bool = False  # the dump ended before its value did: a long line's first piece
    absent: bool = False  # no dump came by the boot's end (a late one still decides)

    @property
    def reported(self) -> bool:
        return not self.reason

    @property
    def passed(self) -> bool:
        return self.reported and not any(f.failing for f in self.flags)

    def summary(self) -> str:
        """``args 30/31 took effect, 1 differs: max_running_requests 16 -> 13``."""
        if not self.reported:
            return f"args not reported: {self.reason}"
        took = sum(f.verdict == "took effect" for f in self.flags)
        text = f"args {took}/{len(self.flags)} took effect"
        for verdict in ("differs", "unknown"):
            hit = [f for f in self.flags if f.verdict == verdict]
            if hit:
                text += f", {len(hit)} {verdict}: " + ", ".join(_brief(f) for f in hit)
        return text

    def short(self) -> str:
        """The summary in a panel's cell: ``31/31 took effect``, ``30/31 · max_running_requests 16→13``."""
        if not self.reported:
            return "not reported"
        took = sum(f.verdict == "took effect" for f in self.flags)
        off = [f"{f.field} {f.given}→{f.reported}" if f.verdict == "differs" else f"{f.flag}?"
               for f in self.flags if f.verdict != "took effect"]
        if not off:
            return f"{took}/{len(self.flags)} took effect"
        return f"{took}/{len(self.flags)} · " + ", ".join(off)  # the panel's column is 48 wide

    def to_json(self) -> dict[str, Any]:
        return {"reported": self.reported, "reason": self.reason or None,
                "version": self.version, "table": self.table,
                "flags": [f.to_json() for f in self.flags]}


def _brief(f: FlagVerdict) -> str:
    mark = " (expected)" if f.expected else ""
    if f.verdict == "differs":
        return f"{f.field or f.flag} {f.given} -> {f.reported if f.reported is not None else 'absent'}{mark}"
    return f"{f.flag}{mark}"


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"


def shown(value: object) -> str:
    """A dumped value as a verdict shows it: Python's literal spelling, raw text as printed."""
    if isinstance(value, Raw):
        return _cut(value.text)
    if isinstance(value, EnumValue):
        return _cut(f"{value.name}")
    if isinstance(value, Call):
        return _cut(f"{value.name}(...)")
    if isinstance(value, str):
        return _cut(value)  # as the flag's text is shown: 16 -> 13, auto -> fp8
    return _cut(repr(value))


# -- the command line ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Given:
    """One flag of the command line with the text of its value(s)."""

    flag: str  # as written (an abbreviation stays one)
    values: tuple[str, ...]  # () for a switch
    secret: bool
    negated: bool = False  # --no-x
    spec: Flag | None = None  # the flag the engine's parser takes it for; None: unknown


def given_flags(command: Sequence[str], secret_at: frozenset[int],
                table: FlagTable | None) -> list[Given]:
    """The flags of ``command`` in order, read as the engine's parser reads them (the walk the
    recipe's lint uses: abbreviations, ``--``, how many values a flag takes); an unknown flag
    keeps the values after it, of which the first is compared."""
    out: list[Given] = []
    for use in walk(table, command):
        name, flag = use.spelling, use.flag
        # vLLM's BooleanOptionalAction lists "--no-x" among the flag's own spellings
        negated = flag is not None and flag.negatable and name.startswith("--no-") \
            and not flag.dest.startswith("no_")
        if flag is None and table is not None and name.startswith("--no-"):
            plain = table.option("--" + name[5:])
            if plain is not None and plain.kind == "bool":
                flag, negated = plain, True
        secret = any(k in secret_at for k, _ in use.values)
        out.append(Given(name, tuple(v for _, v in use.values), secret, negated, flag))
    return out


# -- comparing -----------------------------------------------------------------------------------

_NO = object()  # a text that does not read as the flag's kind


def coerce(flag: Flag | None, given: Given) -> object:
    """The value the engine's parser makes of the flag's text (``_NO`` if it would refuse it)."""
    if flag is not None and flag.kind == "bool" and not given.values:
        return not given.negated
    if not given.values:
        return True  # an unknown switch
    if flag is not None and flag.nargs in ("+", "*"):
        return [_one(flag, v) for v in given.values]
    return _one(flag, given.values[0])


def _one(flag: Flag | None, text: str) -> object:
    if flag is None:
        return text
    if flag.nullable and text == "None":
        return None
    try:
        if flag.kind == "int":
            return int(text)
        if flag.kind == "float":
            return float(text)
        if flag.kind == "bool":
            return {"true": True, "false": False, "1": True, "0": False}.get(text.lower(), text)
        if flag.kind == "json":
            return json.loads(text)
    except ValueError:
        return _NO
    return text


def same(given: object, reported: object) -> bool:
    """Equal as the engine would hold them: numbers by value, sequences item by item, an enum
    by its value or name, json text against its parsed form, raw text against the given text."""
    if isinstance(reported, EnumValue):
        return same(given, reported.value) or (
            isinstance(given, str) and reported.name.rsplit(".", 1)[-1].lower() == given.lower())
    if isinstance(reported, Raw):  # a dotted name reads as its last part: torch.bfloat16
        return isinstance(given, str) and given in (reported.text, reported.text.rsplit(".", 1)[-1])
    if isinstance(given, bool) or isinstance(reported, bool):
        return given is reported or (isinstance(given, str) and given.lower() == str(reported).lower())
    if isinstance(given, (int, float)) and isinstance(reported, (int, float)):
        return given == reported or math.isclose(given, reported, rel_tol=1e-9)
    if isinstance(given, (list, tuple)) and isinstance(reported, (list, tuple)):
        return len(given) == len(reported) and all(same(a, b) for a, b in zip(given, reported, strict=True))
    if isinstance(given, (list, tuple)) and len(given) == 1:
        return same(given[0], reported)
    if isinstance(given, (dict, list)) and isinstance(reported, str):
        try:
            return bool(given == json.loads(reported))
        except ValueError:
            return False
    if isinstance(given, str) and isinstance(reported, (int, float, dict, list)):
        try:
            return same(json.loads(given), reported)
        except ValueError:
            return False
    return given == reported


def _masked(value: object) -> bool:
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_masked(v) for v in value)
    return isinstance(value, str) and value in MASKS


def _default(flag: Flag) -> object:
    d = flag.default
    return Raw(str(d["repr"])) if isinstance(d, dict) and set(d) == {"repr"} else d


def judge_flag(g: Given, table: FlagTable | None, dump: dict[str, object], complete: bool,
               expected: frozenset[str]) -> FlagVerdict:
    flag = g.spec
    dest = flag.dest if flag is not None else g.flag.lstrip("-").replace("-", "_")
    text = " ".join(g.values) if g.values else ("false" if g.negated else "true")
    given_shown = MASK if g.secret else _cut(text)
    is_expected = g.flag in expected or dest in expected
    value = coerce(flag, g)

    def verdict(v: Verdict, reported: object | None, note: str = "", absent: bool = False) -> FlagVerdict:
        rep = None if absent else (MASK if g.secret else shown(reported))
        return FlagVerdict(g.flag, dest if (flag is not None or dest in dump) else None, v,
                           given_shown, rep, note, is_expected)

    if dest not in dump:
        if flag is None:
            where = f"the {table.engine} {table.version} table" if table else "no flag table"
            return verdict("unknown", None, f"not in {where} nor in the dump", absent=True)
        if complete:
            return verdict("unknown", None, "the engine printed no such field", absent=True)
        default = _default(flag)
        if value is not _NO and same(value, default):
            return verdict("took effect", default, "absent: equals the default")
        return verdict("differs", default, "absent from the non-default args: the default runs")
    reported = dump[dest]
    if g.secret and _masked(reported):
        return verdict("took effect", reported, "printed masked: present, value not compared")
    if value is not _NO and same(value, reported):
        return verdict("took effect", reported)
    return verdict("differs", reported)


@dataclass(frozen=True)
class ArgsJudge:
    """One rank's args check: its command line, what is secret in it, what is expected."""

    engine: str
    command: tuple[str, ...]
    secret_at: frozenset[int] = frozenset()  # token indexes holding secret values
    expected: frozenset[str] = frozenset()  # flags (or fields) whose difference is known
    table_version: str | None = None  # the newest shipped when None
    dump_spec: ArgsDump = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dump_spec", engine_rules(self.engine).args_dump)

    @property
    def pattern(self) -> str:
        return self.dump_spec.pattern

    def table(self, version: str | None) -> FlagTable | None:
        """The printed version's table when it ships, else the recipe's or the newest."""
        return (load(self.engine, version) if version else None) or load(self.engine, self.table_version)

    def version(self, text: str) -> str | None:
        return self.dump_spec.version(text)

    def judge(self, text: str, version: str | None = None) -> ArgsReport | None:
        """The report a dump line gives; None when ``text`` holds no dump."""
        table = self.table(version)
        tv = table.version if table else ""
        try:
            dump = self.dump_spec.read(text)
        except ReprError as exc:
            return ArgsReport(version=version, table=tv, reason=f"the dump could not be read: {exc}",
                              cut_off=isinstance(exc, CutOff))
        if dump is None:
            return None
        flags = given_flags(self.command, self.secret_at, table)
        return ArgsReport(tuple(judge_flag(g, table, dump, self.dump_spec.complete, self.expected)
                                for g in flags), version, tv)


def not_reported(version: str | None = None) -> ArgsReport:
    return ArgsReport(version=version, reason="no dump of the arguments by the end of the boot",
                      absent=True)


@dataclass
class ArgsReader:
    """The args checks' reading of each rank's lines: its judge, the engine version it printed,
    and the pieces of a dump the log pump cut (lines over 32 KiB) so far."""

    judges: dict[int, ArgsJudge] = field(default_factory=dict)
    warn: bool = False  # [boot] args = "warn": differences are reported, never fail
    versions: dict[int, str] = field(default_factory=dict)  # the engine version a rank printed
    partial: dict[int, str] = field(default_factory=dict)  # a cut dump's text so far, per rank

    def line(self, rank: int, text: str) -> ArgsReport | None:
        """The report a line of ``rank`` gives; None when it holds no dump (nor a piece of
        one); a ``cut_off`` report while the dump waits for its next piece."""
        judge = self.judges.get(rank)
        if judge is None:
            return None
        if text.startswith(CONTINUED):  # the next piece of a long dump, or of any long line
            if rank not in self.partial:
                return None
            text = self.partial.pop(rank) + text[len(CONTINUED):]
        else:
            self.partial.pop(rank, None)
            version = judge.version(text)
            if version is not None:
                self.versions[rank] = version
        report = judge.judge(text, self.versions.get(rank))
        if report is not None and report.cut_off:
            self.partial[rank] = text
        return report

    def finish(self, rank: int, report: ArgsReport | None) -> ArgsReport:
        """The rank's report at the boot's end without a whole dump: not reported, or the
        cut-off reason of the dump whose rest never came."""
        self.partial.pop(rank, None)
        return report if report is not None and report.cut_off else not_reported(
            self.versions.get(rank))

    def reset(self, rank: int) -> None:
        """A restarted rank prints its version and its dump again."""
        self.versions.pop(rank, None)
        self.partial.pop(rank, None)

    def copy(self) -> ArgsReader:
        return ArgsReader(dict(self.judges), self.warn, dict(self.versions), dict(self.partial))
