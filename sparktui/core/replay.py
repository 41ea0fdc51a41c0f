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
from sparktui.core.runstore import RankLog


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


def last_lines(path: Path, after: int, count: int,
               end: tuple[bytes, int] | None = None) -> list[str]:
    """The texts of the file's last ``count`` lines after line ``after``: from the file's end
    (``end``: its last bytes and its size, ``RankLog.end``) when every line counts (no
    restart), else numbered from its start (``tail``)."""
    if after == 0 and count > 0:
        raw, size = end if end is not None else RankLog(path).end()
        if not size:
            return []
        rows = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")  # as ``read``
        if rows and rows[-1] == b"":
            rows.pop()
        if size <= len(raw) or len(rows) > count:  # the first row may be cut: never one of these
            return [row.partition(b"\t")[2].decode("utf-8", "replace") for row in rows[-count:]]
    return [text for _ts, _rank, no, text in tail(path, 0, count) if no > after]
