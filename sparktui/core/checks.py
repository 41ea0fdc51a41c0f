"""Boot checks evaluated per rank as log lines arrive.

A check is pending until its line appears (passed, with rank, line number and text), or a
must-not-show line appears (failed), or the boot ends without the line (failed). A line that
arrives after the boot ended still passes its check: the log is the truth. The engine's lines
about the requests it serves (``Engine.request_line``: access log, request log) hold the
client's text and are never evidence: no check, fatal line or ready line matches them.

An ``args`` check (one per rank, ``core/argscheck``) is decided by the rank's dump of its
arguments: passed when every flag took effect (or ``[boot] args = "warn"``), failed when one
differs or is unknown, with the verdicts as its match's text; at the boot's end without a dump
it fails as "not reported" (passes under "warn"), and a dump that comes later still decides it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Literal

from sparktui.core.argscheck import CONTINUED, ArgsJudge, ArgsReader, ArgsReport
from sparktui.core.engines import engine
from sparktui.core.linear import Regex
from sparktui.core.patterns import compile_pattern
from sparktui.core.plan import BootPlan, Plan

CheckKind = Literal["ready", "must_show", "must_not_show", "args"]
CheckState = Literal["pending", "passed", "failed"]


# A search over lines joined by "\n" (in RE2's multi-line mode, so ^ and $ still mean a line's
# ends) finds a match wherever a search of one line does, as long as every assertion reads the
# same inside a line: not \A or \z (the ends of the whole text), and no flag group that turns
# the multi-line mode off again. No match spans two lines (``core.linear``: never_nl).
_NOT_PER_LINE = re.compile(r"\\[AzZ]|\(\?[a-zA-Z]*-[a-zA-Z]*m")


def batch_regex(regex: Regex) -> Regex | None:
    """``regex`` for a whole batch of lines at once, or None when that could miss a match."""
    if _NOT_PER_LINE.search(regex.pattern):
        return None
    return Regex("(?m)" + regex.pattern, regex.ignore_case)


@dataclass(frozen=True)
class Check:
    id: int
    kind: CheckKind
    pattern: str
    ranks: str | list[int]  # "any", "all" or a list; must_not_show watches every rank
    regex: Regex
    added: bool = False  # added interactively
    batch: Regex | None = None  # ``batch_regex(regex)``

    def applies_to(self, rank: int) -> bool:
        return self.ranks in ("any", "all") or (isinstance(self.ranks, list) and rank in self.ranks)


@dataclass(frozen=True)
class Match:
    rank: int
    line_no: int
    text: str


@dataclass
class CheckStatus:
    """One check on one rank."""

    state: CheckState = "pending"
    match: Match | None = None
    report: ArgsReport | None = None  # an args check's verdicts per flag


@dataclass(frozen=True)
class CheckUpdate:
    check: Check
    rank: int
    state: CheckState
    match: Match | None


def _no_requests(text: str) -> bool:
    return False


def _decided(check: Check) -> CheckState:
    """The state a matching line gives ``check``, after which its lines change nothing."""
    return "failed" if check.kind == "must_not_show" else "passed"


def _verdict(check: Check, states: list[CheckState]) -> CheckState:
    """A check's verdict from its state on each rank it concerns (``BootChecks.overall``)."""
    if check.kind == "must_not_show":
        if "failed" in states:
            return "failed"
        return "passed" if states and all(s == "passed" for s in states) else "pending"
    if check.ranks == "any":
        if "passed" in states:
            return "passed"
        return "failed" if states and all(s == "failed" for s in states) else "pending"
    if all(s == "passed" for s in states):
        return "passed"
    return "failed" if "failed" in states else "pending"


@dataclass
class BootChecks:
    """All checks of a run, per rank. Feed it numbered lines; it reports what changed."""

    world: int
    checks: list[Check] = field(default_factory=list)
    status: dict[tuple[int, int], CheckStatus] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)
    # Whether a line is about a request the engine served (``Engine.request_line``): skipped.
    request_line: Callable[[str], bool] = _no_requests
    args: ArgsReader = field(default_factory=ArgsReader)  # what the args checks read, per rank

    @classmethod
    def for_plan(cls, plan: Plan) -> BootChecks:
        """The plan's checks, with its engine's request lines skipped and an args check per
        rank unless ``[boot] args = "ignore"``."""
        rules = engine(plan.engine)
        dump = rules.args_dump
        judges = {} if plan.boot.args == "ignore" else {
            r.rank: args_judge(plan, r.rank) for r in plan.ranks if dump.every_rank or r.serves_http}
        return cls.from_plan(plan.boot, plan.world, rules.request_line, judges)

    @classmethod
    def from_plan(cls, boot: BootPlan, world: int, request_line: Callable[[str], bool],
                  judges: dict[int, ArgsJudge] | None = None) -> BootChecks:
        bc = cls(world, request_line=request_line,
                 args=ArgsReader(dict(judges or {}), warn=boot.args == "warn"))
        bc.add("ready", boot.ready, list(boot.ready_ranks))
        for c in boot.must_show:
            bc.add("must_show", c.pattern, c.ranks)
        for line in boot.must_not_show:
            bc.add("must_not_show", line, "all")
        for rank, judge in sorted(bc.args.judges.items()):
            bc.add("args", f"re:{judge.pattern}|^{CONTINUED}", [rank])
        return bc

    def _args_open(self, st: CheckStatus) -> bool:
        """Undecided (a cut dump waits for its pieces), or failed as not reported at the boot's
        end (a late dump decides it)."""
        return st.state == "pending" or st.report is None or st.report.absent

    def _args_line(self, rank: int, st: CheckStatus, line_no: int, text: str) -> CheckState | None:
        report = self.args.line(rank, text)
        if report is None:
            return None
        st.report = report
        if report.cut_off:  # pending until its next piece; the boot's end keeps this reason
            return None
        st.match = Match(rank, line_no, report.summary())
        return "passed" if report.passed or self.args.warn else "failed"

    def add(self, kind: CheckKind, pattern: str, ranks: str | list[int], added: bool = False) -> Check:
        """Add a check; raises ValueError with a sentence on a bad pattern."""
        regex = compile_pattern(pattern)
        check = Check(len(self.checks), kind, pattern, ranks, regex, added, batch_regex(regex))
        self.checks.append(check)
        for r in range(self.world):
            if kind == "must_not_show" or check.applies_to(r):
                self.status[(check.id, r)] = CheckStatus()
        return check

    def _open(self, check: Check, rank: int) -> bool:
        """A line of the rank could still change the check."""
        st = self.status.get((check.id, rank))
        if st is not None and check.kind == "args":
            return self._args_open(st)
        return st is not None and st.state != _decided(check)

    def open_patterns(self, rank: int) -> list[Regex]:
        """The regexes of the rank's checks a line could still change: only a line one of them
        matches can (``feed``), so a long log is searched for these alone (``core.replay``)."""
        return [check.regex for check in self.checks if self._open(check, rank)]

    def feed(self, rank: int, lines: Iterable[tuple[int, str]],
             only: Check | None = None) -> list[CheckUpdate]:
        """Evaluate ``(line_no, text)`` lines of ``rank``; returns the checks whose state changed."""
        watching = [c for c in ([only] if only else self.checks) if self._open(c, rank)]
        if not watching:
            return []
        lines = list(lines)
        if len(lines) > 1:
            # Most batches match nothing (a running engine's decode lines): one search over the
            # whole batch per check rules that out; the lines are searched one by one only for
            # the checks that found something (or could not be searched that way). The text is
            # encoded for RE2 once, not once per check.
            joined = "\n".join(text for _, text in lines).encode("utf-8", "surrogatepass")
            watching = [c for c in watching if c.batch is None or c.batch.search_bytes(joined)]
            if not watching:
                return []
        updates: list[CheckUpdate] = []
        # each check with its status on this rank and the state a matching line gives it
        open_checks = [(c, self.status[(c.id, rank)], _decided(c)) for c in watching]
        for line_no, text in lines:
            data = text.encode("utf-8", "surrogatepass")  # searched by every open check
            request: bool | None = None  # asked once a check matches the line (few lines do)
            for check, st, state in open_checks:
                if check.kind == "args":
                    if not self._args_open(st) or not check.regex.search_bytes(data):
                        continue
                    if request is None:
                        request = self.request_line(text)
                    decided = None if request else self._args_line(rank, st, line_no, text)
                    if decided is not None:
                        st.state = decided
                        updates.append(CheckUpdate(check, rank, decided, st.match))
                    continue
                if st.state == state or not check.regex.search_bytes(data):
                    continue
                if request is None:
                    request = self.request_line(text)
                if not request:
                    st.state, st.match = state, Match(rank, line_no, text)
                    updates.append(CheckUpdate(check, rank, state, st.match))
        return updates

    def finish(self, rank: int, only: Check | None = None) -> list[CheckUpdate]:
        """The rank's boot is over (ready, failed or timed out): what never showed has failed;
        must-not-show lines that never appeared have passed. ``only``: that check alone (one
        added after the boot ended is judged as the others were at its end)."""
        self.finished.add(rank)
        updates = []
        for check in [only] if only else self.checks:
            st = self.status.get((check.id, rank))
            if st is None or st.state != "pending":
                continue
            if check.kind == "args":
                st.report = self.args.finish(rank, st.report)
                st.match = None
                st.state = "passed" if self.args.warn else "failed"
            else:
                st.state = "passed" if check.kind == "must_not_show" else "failed"
            updates.append(CheckUpdate(check, rank, st.state, None))
        return updates

    def reset(self, rank: int) -> None:
        """A restarted rank boots again: its checks start over."""
        self.finished.discard(rank)
        self.args.reset(rank)
        for (_cid, r), st in self.status.items():
            if r == rank:
                st.state, st.match, st.report = "pending", None, None

    def _of(self, check: Check) -> list[tuple[int, CheckStatus]]:
        """The check's status on each rank it concerns, in rank order: looked up per rank, not
        found among every check's (a status of 32 ranks read the whole table per check)."""
        return [(rank, st) for rank in range(self.world)
                if (st := self.status.get((check.id, rank))) is not None]

    def overall(self, check: Check) -> CheckState:
        """``any``: one rank suffices; ``all`` and lists: every listed rank."""
        return _verdict(check, [st.state for _, st in self._of(check)])

    def rank_summary(self, rank: int) -> dict[str, int]:
        """passed/failed/pending over the checks that concern ``rank``; an ``any`` check counts
        as its overall state, so a line seen on one rank is not pending on the others."""
        out = {"passed": 0, "failed": 0, "pending": 0}
        for check in self.checks:
            st = self.status.get((check.id, rank))
            if st is None:
                continue
            state = self.overall(check) if check.ranks == "any" and check.kind != "must_not_show" \
                else st.state
            out[state] += 1
        return out

    def shown(self, rank: int, patterns: Collection[str]) -> bool:
        """Whether a must-not-show line of one of these patterns appeared on ``rank``."""
        return any(check.kind == "must_not_show" and check.pattern in patterns
                   and self.status[(check.id, rank)].state == "failed" for check in self.checks)

    def fatal(self, rank: int) -> Match | None:
        for check in self.checks:
            st = self.status.get((check.id, rank))
            if check.kind == "must_not_show" and st is not None and st.state == "failed":
                return st.match
        return None

    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if self.overall(c) == "failed"]

    def failed_on(self, check: Check) -> list[int]:
        """The ranks where ``check`` failed: its line never appeared there (or, for a
        must-not-show line, it did)."""
        return [r for r, st in self._of(check) if st.state == "failed"]

    def to_json(self) -> list[dict[str, object]]:
        """Every check as ``status --json`` and the status document give it: what it asks (kind,
        pattern, ranks), its verdict, the ranks where it failed and, per rank, its state, the
        line that decided it and (an args check) the rank's verdicts. The CLI's check lines are
        written from this alone (``cli.render``), so a status read from a follower's document
        says what one worked out here says."""
        out: list[dict[str, object]] = []
        for check in self.checks:
            of = self._of(check)  # read once: the verdict, where it failed and each rank's state
            per_rank: list[dict[str, object]] = []
            for rank, st in of:
                per_rank.append({"rank": rank, "state": st.state,
                                 "line": st.match.line_no if st.match else None,
                                 "text": st.match.text if st.match else None})
                if check.kind == "args":
                    per_rank[-1]["args"] = ({**st.report.to_json(), "summary": st.report.summary()}
                                            if st.report else None)
            out.append({"id": check.id, "kind": check.kind, "pattern": check.pattern,
                        "ranks": check.ranks, "added": check.added,
                        "state": _verdict(check, [st.state for _, st in of]),
                        "failed_on": [r for r, st in of if st.state == "failed"],
                        "per_rank": per_rank})
        return out

    def ready_seen(self, rank: int) -> bool:
        """Whether the engine's ready line appeared on ``rank`` (False where it is not expected)."""
        for check in self.checks:
            if check.kind == "ready" and check.applies_to(rank):
                st = self.status.get((check.id, rank))
                return st is not None and st.state == "passed"
        return False

    def snapshot(self) -> BootChecks:
        """A copy that later lines do not change, for an event to carry (the checks themselves
        are frozen and shared)."""
        return BootChecks(self.world, list(self.checks),
                          {key: CheckStatus(st.state, st.match, st.report)
                           for key, st in self.status.items()},
                          set(self.finished), self.request_line, self.args.copy())

    def report(self, rank: int) -> ArgsReport | None:
        """The rank's flag verdicts, once its dump arrived or its boot ended."""
        for check in self.checks:
            if check.kind == "args" and check.applies_to(rank):
                st = self.status.get((check.id, rank))
                return st.report if st is not None else None
        return None


def args_judge(plan: Plan, rank: int) -> ArgsJudge:
    """Rank ``rank``'s args check: its container's command (the recipe's args and the
    launcher's rank flags), with the positions of its secret values."""
    c = plan.ranks[rank].container
    return ArgsJudge(plan.engine, tuple(c.command),
                     frozenset(c.secrets.arg_positions(c.command)),
                     frozenset(plan.boot.args_expected))
