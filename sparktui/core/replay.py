"""What a rank's file already holds for its boot checks, read at ``grep``'s pace.

Attaching to a running group (``status``, ``logs``, the console reopening) evaluates the checks
over everything the run captured since each rank's last restart. Read line by line into Python
and fed to every check, a million lines took 5-6 s of a ``status``. A line changes a check only
when the check's own regex matches it (``BootChecks.feed``): so the file is searched in blocks
(``core.blockgrep``, RE2 at memory speed) for the lines any open check's regex matches, and only
those are fed, in order, numbered as ``RankLog.read`` numbers them. The verdicts are the same.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from sparktui.core.blockgrep import BlockSearch
from sparktui.core.linear import Regex
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import RunScan, tail


def deciding_lines(path: Path, after: int, patterns: Sequence[Regex]) -> list[tuple[int, str]]:
    """``(line_no, text)`` of the lines after line ``after`` whose text one of ``patterns``
    matches, in file order; nothing when there is no pattern."""
    if not patterns:
        return []
    union = patterns[0] if len(patterns) == 1 else Regex(
        "|".join(f"(?{'i' if p.ignore_case else ''}:{p.pattern})" for p in patterns))
    search = BlockSearch.of(LineFilter(union.pattern, union))
    found = RunScan({0: path}, search, cap=sys.maxsize).run()
    return [(no, text) for _ts, _rank, no, text in found.lines if no > after]


def last_lines(path: Path, after: int, count: int) -> list[str]:
    """The texts of the file's last ``count`` lines after line ``after``."""
    return [text for _ts, _rank, no, text in tail(path, 0, count) if no > after]
