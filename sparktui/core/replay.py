"""What a rank's file already holds for its boot checks, read at ``grep``'s pace.

Attaching to a running group (``status``, ``logs``, the console reopening) evaluates the checks
over everything the run captured since each rank's last restart. Read line by line into Python
and fed to every check, a million lines took 5-6 s of a ``status``. A line changes a check only
when the check's own regex matches it (``BootChecks.feed``): so the file is searched in blocks
(``core.blockgrep``, RE2 at memory speed) for the lines any open check's regex matches, and only
those are fed, in order, numbered as ``RankLog.read`` numbers them. The verdicts are the same.

A file of hours is still searched whole on every attach (0.23-0.25 s of a ``status`` of 1 M
lines). ``ReplayCache`` keeps what a search found in the run's folder (``replay.json``, 0600),
with the place in the file it read to: the next search of the same patterns reads only the
lines after it and adds what it finds to what was kept, so it finds exactly what a search of
the whole file finds. A kept search is used only for the same patterns (every regex and its
case), the same file (its inode, as many rewinds in the run's events, at least as many bytes,
the same 4 KiB before the place) and a place after a newline; otherwise the file is searched
whole, as without it. The lines kept are the rank's file's own (its secrets masked already).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sparktui.core.blockgrep import BlockSearch
from sparktui.core.linear import Regex
from sparktui.core.linefilter import LineFilter
from sparktui.core.private import private_open
from sparktui.core.rungrep import end_print, numbered, tail
from sparktui.core.runstore import RankLog

REPLAY_FILE = "replay.json"
"""In a run's folder: what the replays of its files found, and where each stopped."""
KEPT_LINES = 4096
"""A search that found more is not kept (its patterns match what an engine says all along)."""


def _union(patterns: Sequence[Regex]) -> Regex:
    return patterns[0] if len(patterns) == 1 else Regex(
        "|".join(f"(?{'i' if p.ignore_case else ''}:{p.pattern})" for p in patterns))


def deciding_lines(path: Path, after: int, patterns: Sequence[Regex],
                   cache: ReplayCache | None = None, rank: int = 0,
                   rewinds: int = 0) -> list[tuple[int, str]]:
    """``(line_no, text)`` of the lines after line ``after`` whose text one of ``patterns``
    matches, in file order; nothing when there is no pattern. With ``cache``: only what the
    rank's last kept search did not read is searched (``ReplayCache``; ``rewinds``: the
    ``log-rewound`` events of the rank in the run's events)."""
    if not patterns:
        return []
    union = _union(patterns)
    search = BlockSearch.of(LineFilter(union.pattern, union))
    if cache is None:
        lines, _last = numbered(path, search)
        return [(no, text) for _ts, _rank, no, text in lines if no > after]
    found = cache.search(rank, path, search, _key(patterns), rewinds)
    return [(no, text) for no, text in found if no > after]


def _key(patterns: Sequence[Regex]) -> list[list[Any]]:
    return [[p.pattern, p.ignore_case] for p in patterns]


class ReplayCache:
    """The kept searches of a run's files (``REPLAY_FILE``), a rank each: the patterns, the
    file's inode and rewinds, the place read to (bytes and lines before it), the digest of the
    bytes before it, and the ``(line_no, text)`` found before it. Read once, searched from in a
    thread a rank (each its own entry), written back once (``save``)."""

    def __init__(self, path: Path, entries: dict[str, Any] | None = None) -> None:
        self.path = path
        self.entries: dict[str, Any] = entries or {}
        self.changed = False

    @classmethod
    def load(cls, path: Path) -> ReplayCache:
        """The kept searches, or none (no file, or one that cannot be read: searched whole)."""
        try:
            with path.open("r", encoding="utf-8") as f:
                entries = json.load(f)
        except (OSError, ValueError):
            entries = {}
        return cls(path, entries if isinstance(entries, dict) else {})

    def _kept(self, rank: int, path: Path, key: list[list[Any]], inode: int, size: int,
              rewinds: int) -> tuple[int, int, list[tuple[int, str]]] | None:
        """The rank's kept search when it holds for this file and these patterns."""
        entry = self.entries.get(str(rank))
        try:
            if not (isinstance(entry, dict) and entry["patterns"] == key
                    and entry["inode"] == inode and entry["rewinds"] == rewinds):
                return None
            offset, lines, found = int(entry["offset"]), int(entry["lines"]), entry["found"]
            if not 0 < offset <= size or lines < 0 or end_print(path, offset) != (entry["print"], True):
                return None
            return offset, lines, [(int(no), str(text)) for no, text in found]
        except (KeyError, TypeError, ValueError):
            return None

    def search(self, rank: int, path: Path, search: BlockSearch, key: list[list[Any]],
               rewinds: int) -> list[tuple[int, str]]:
        """Every ``(line_no, text)`` of the file that ``search`` keeps, in file order: the kept
        ones and those after their place; the rank's entry made anew for the place read to."""
        try:
            st = path.stat()
        except OSError:
            return []
        size = st.st_size
        start, before, found = self._kept(rank, path, key, st.st_ino, size, rewinds) or (0, 0, [])
        lines, last = numbered(path, search, start=start, before=before, limit=size)
        found += [(no, text) for _ts, _rank, no, text in lines]
        printed = end_print(path, size) if size else None
        entry = ({"patterns": key, "inode": st.st_ino, "rewinds": rewinds, "offset": size,
                  "lines": last, "print": printed[0], "found": found}
                 if printed is not None and printed[1] and len(found) <= KEPT_LINES else None)
        if entry != self.entries.get(str(rank)):  # nothing new written: the file stays as it is
            if entry is None:
                self.entries.pop(str(rank), None)
            else:
                self.entries[str(rank)] = entry
            self.changed = True
        return found

    def save(self) -> None:
        """Written aside and renamed, 0600 (not fsynced: a file cut short by a crash is read
        as none, and the next search reads the whole file)."""
        if not self.changed:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        with private_open(tmp, "x", encoding="utf-8") as f:
            json.dump(self.entries, f, separators=(",", ":"))
        os.replace(tmp, self.path)
        self.changed = False


def last_lines(path: Path, after: int, count: int,
               end: tuple[bytes, int] | None = None) -> list[str]:
    """The texts of the file's last ``count`` lines after line ``after``: from the file's end
    (``end``: its last bytes and its size, ``RankLog.end``; widened to its last ``END_MOST``
    bytes when those hold too few lines) when every line counts (no restart), else numbered
    from its start (``tail``)."""
    if after == 0 and count > 0:
        found = RankLog(path).from_end(lambda raw, size: _last_rows(raw, size, count), end)
        if found is not None:
            return found
    return [text for _ts, _rank, no, text in tail(path, 0, count) if no > after]


def _last_rows(raw: bytes, size: int, count: int) -> list[str] | None:
    """The texts of the last ``count`` lines in a file's last bytes ``raw`` (of ``size`` in
    all), or None when they hold fewer whole lines and the file more."""
    if not size:
        return []
    rows = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")  # as ``read``
    if rows and rows[-1] == b"":
        rows.pop()
    if size <= len(raw) or len(rows) > count:  # the first row may be cut: never one of these
        return [row.partition(b"\t")[2].decode("utf-8", "replace") for row in rows[-count:]]
    return None
