"""TOML files with the line of every key, so errors can point at the line to fix.

``tomllib`` gives values but no positions. After it has accepted a file, a small scanner
walks the same text and records where each key, table and array element starts (and where
each string or other single value stands, so a view can mask one in place). It trusts
the text to be valid TOML (tomllib said so) and never raises on odd input: a position it
cannot find is simply not recorded.
"""

from __future__ import annotations

import functools
import re
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from sparktui.core.errors import ConfigError, display_path, sentence
from sparktui.core.limits import MAX_DEPTH, MAX_FILE_BYTES, data_problems, text_depth_line
from sparktui.core.problems import Problem

KeyPath = tuple[str | int, ...]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SYNTAX_POS = re.compile(r"\(at line (\d+), column (\d+)\)")


def format_key(path: Sequence[str | int]) -> str:
    """``("staging", 0, "min_free")`` -> ``staging[0].min_free``."""
    out = ""
    for comp in path:
        if isinstance(comp, int):
            out += f"[{comp}]"
        else:
            name = comp if _BARE.fullmatch(comp) else '"' + comp.replace('"', '\\"') + '"'
            out += f".{name}" if out else name
    return out


@dataclass
class TomlSource:
    """A parsed TOML document, its text and where each key path starts."""

    data: dict[str, Any]
    text: str
    path: Path | None = None
    positions: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    spans: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    """Offsets ``[start, end)`` in ``text`` of each string, number, boolean or date value, quotes
    included (not of arrays and inline tables)."""

    @functools.cached_property
    def display(self) -> str | None:
        return display_path(self.path)  # resolves the path: once, not once per problem

    def line_of(self, path: Sequence[str | int]) -> tuple[int | None, int | None]:
        """The line and column of ``path``, or of its nearest recorded ancestor, else of its
        first recorded descendant: tables made implicitly by a dotted key (``a.b.c = 1``,
        ``[a.b.c]``) have no position of their own, and a 1,000-deep one is reported at its
        17th level."""
        p = tuple(path)
        while p:
            if p in self.positions:
                return self.positions[p]
            p = p[:-1]
        whole = tuple(path)
        below = [pos for key, pos in self.positions.items() if key[:len(whole)] == whole]
        return min(below) if whole and below else (None, None)

    def problem(
        self,
        path: Sequence[str | int],
        message: str,
        *,
        severity: str = "error",
        code: str = "schema",
    ) -> Problem:
        line, col = self.line_of(path)
        return Problem(
            message=message,
            key=format_key(path) or None,
            line=line,
            column=col,
            severity="warning" if severity == "warning" else "error",
            code=code,
            file=self.display,
        )


def parse_toml(text: str, path: Path | None = None, error: type[ConfigError] = ConfigError) -> TomlSource:
    """Parse ``text``; a syntax error, a duplicate key or input past a limit (``core.limits``)
    becomes ``error`` naming the line (and the key where there is one)."""
    where = display_path(path)
    if len(text) > MAX_FILE_BYTES:
        raise error([Problem(f"{len(text):,} characters; a recipe or cluster file is at most "
                             f"{MAX_FILE_BYTES // 1024} KiB", code="limit", file=where)])
    text = text.removeprefix("\ufeff")  # a byte order mark some editors write
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error([_syntax_problem(text, str(exc), where)]) from None
    except RecursionError:
        raise error([Problem(f"nested more than {MAX_DEPTH} levels deep; a recipe or cluster "
                             "file needs at most a few", line=text_depth_line(text),
                             code="limit", file=where)]) from None
    except ValueError as exc:  # an integer of thousands of digits (int's own limit)
        digits = _LONG_NUMBER.search(text)
        line = text.count("\n", 0, digits.start()) + 1 if digits else None
        raise error([Problem(f"a number sparktui cannot read: {sentence(exc)}", line=line,
                             code="limit", file=where)]) from None
    source = TomlSource(data=data, text=text, path=path)
    scanner = _Scanner(text)
    try:
        source.positions = scanner.scan()
        source.spans = scanner.spans
    except Exception:  # the scanner is best effort; a missing line is not worth a crash
        source.positions, source.spans = {}, {}
    over = data_problems(data)
    if over:
        raise error([source.problem(key, message, code="limit") for key, message in over])
    return source


def _syntax_problem(text: str, message: str, where: str | None) -> Problem:
    """tomllib's complaint with its position; a key set twice names the key and both lines."""
    line = col = None
    m = _SYNTAX_POS.search(message)
    if m:
        line, col = int(m.group(1)), int(m.group(2))
        message = _SYNTAX_POS.sub("", message).strip()
    elif message.endswith("(at end of document)"):
        line = text.count("\n") + (0 if text.endswith("\n") else 1)
        message = message.removesuffix("(at end of document)").strip() + " at the end of the file"
    if line is not None and _DUPLICATE.search(message):
        found = _duplicate(text, line)
        if found is not None:
            key, first, col = found
            return Problem(f"set twice, on line {first} and again on line {line}; TOML allows "
                           "each key once (remove one)", key=key, line=line,
                           column=col, code="duplicate", file=where)
    return Problem(f"TOML syntax error: {message}", line=line, column=col, code="syntax",
                   file=where)


_LONG_NUMBER = re.compile(r"[0-9_]{4000,}")
_DUPLICATE = re.compile(r"Cannot overwrite a value|Cannot declare .* twice|Duplicate inline table key")


def _duplicate(text: str, line: int) -> tuple[str, int, int] | None:
    """The key defined on ``line`` that an earlier line already defined, that earlier line and
    the key's column (tomllib says only "Cannot overwrite a value")."""
    head = "\n".join(text.split("\n")[:line])
    scanner = _Scanner(head)
    try:
        scanner.scan()
    except Exception:  # best effort, as for positions
        return None
    defined = scanner.defined
    here = [(i, path, col) for i, (path, (at, col)) in enumerate(defined) if at == line]

    def related(same: bool, deeper: bool, shallower: bool) -> tuple[str, int, int] | None:
        for i, path, col in reversed(here):
            for earlier, (first, _c) in defined[:i]:
                n, m = len(path), len(earlier)
                if (same and earlier == path) or (deeper and m > n and earlier[:n] == path) or (
                        shallower and m < n and path[:m] == earlier and first != line):
                    return format_key(path if m > n else earlier), first, col
        return None

    # the same key first; else a table whose key a dotted key already made (a.b = 1, then
    # [a]); else a value that a later dotted key treats as a table (a = 1, then a.b = 2)
    return related(True, False, False) or related(False, True, False) or \
        related(False, False, True)


def read_toml(path: Path, error: type[ConfigError] = ConfigError) -> TomlSource:
    """Read and parse a TOML file; a missing, unreadable, oversized or non-UTF-8 file is
    ``error``, not a traceback (nor a hang: a FIFO or a device is refused before it is read)."""
    where = display_path(path)
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(st.st_mode):
            raise error([Problem("not a regular file", code="io", file=where)])
        if st.st_size > MAX_FILE_BYTES:
            raise error([Problem(f"{st.st_size / 2**20:.1f} MiB; a recipe or cluster file is at "
                                 f"most {MAX_FILE_BYTES // 1024} KiB", code="limit", file=where)])
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise error([Problem("file not found", code="io", file=where)]) from None
    except IsADirectoryError:
        raise error([Problem("is a folder, not a TOML file", code="io", file=where)]) from None
    except OSError as exc:
        raise error([Problem(f"cannot read: {exc.strerror or sentence(exc)}", code="io",
                             file=where)]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise error([Problem(f"not UTF-8 text (byte {exc.start})", line=line, code="io",
                             file=where)]) from None
    return parse_toml(text, path, error)


class _Scanner:
    """Records the (line, column) of table headers, keys, array elements and inline keys."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.n = len(text)
        self.line = 1
        self.line_start = 0
        self.out: dict[KeyPath, tuple[int, int]] = {}
        self.aot: dict[tuple[str, ...], int] = {}
        self.defined: list[tuple[KeyPath, tuple[int, int]]] = []  # every key and header, in order
        self.spans: dict[KeyPath, tuple[int, int]] = {}  # where each single value stands

    # -- low level ---------------------------------------------------------------------
    def pos(self) -> tuple[int, int]:
        return (self.line, self.i - self.line_start + 1)

    def advance(self, k: int = 1) -> None:
        end = min(self.i + k, self.n)
        newlines = self.s.count("\n", self.i, end)
        if newlines:
            self.line += newlines
            self.line_start = self.s.rfind("\n", self.i, end) + 1
        self.i += k

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < self.n else ""

    def skip_ws(self, newlines: bool = False) -> None:
        while self.i < self.n:
            c = self.s[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.advance()
            elif c == "#":
                self.skip_line()
            else:
                break

    def skip_line(self) -> None:
        end = self.s.find("\n", self.i)
        self.i = self.n if end < 0 else end  # no newline crossed: the line stays

    # -- tokens ------------------------------------------------------------------------
    def read_string(self) -> str:
        q = self.peek()
        triple = self.s.startswith(q * 3, self.i)
        if triple:
            self.advance(3)
            end = q * 3
            start = self.i
            while self.i < self.n and not self.s.startswith(end, self.i):
                if q == '"' and self.peek() == "\\":
                    self.advance()
                self.advance()
            value = self.s[start:self.i]
            self.advance(3)
            while self.peek() == q:  # up to two extra quotes belong to the content
                self.advance()
            return value
        self.advance()
        close = self.s.find(q, self.i)
        stop = self.s.find("\n", self.i)
        if close >= 0 and (stop < 0 or close < stop) and (q == "'" or "\\" not in self.s[self.i:close]):
            value = self.s[self.i:close]  # the common case: no escape, on one line
            self.i = close + 1
            return value
        chars: list[str] = []
        while self.i < self.n and self.peek() != q and self.peek() != "\n":
            if q == '"' and self.peek() == "\\":
                self.advance()
                esc = self.peek()
                chars.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\"}.get(esc, esc))
                self.advance()
                continue
            chars.append(self.peek())
            self.advance()
        self.advance()
        return "".join(chars)

    def read_key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self.skip_ws()
            c = self.peek()
            if c in "\"'":
                parts.append(self.read_string())
            else:
                m = _BARE.match(self.s, self.i)
                if not m:
                    break
                parts.append(m.group(0))
                self.advance(m.end() - self.i)
            self.skip_ws()
            if self.peek() == ".":
                self.advance()
                continue
            break
        return parts

    def read_value(self, path: KeyPath) -> None:
        self.skip_ws()
        c = self.peek()
        start = self.i
        if c in "\"'":
            self.read_string()
            self.spans.setdefault(path, (start, self.i))
        elif c == "[":
            self.advance()
            index = 0
            while self.i < self.n:
                self.skip_ws(newlines=True)
                if self.peek() == "]":
                    self.advance()
                    break
                self.out.setdefault((*path, index), self.pos())
                self.read_value((*path, index))
                index += 1
                self.skip_ws(newlines=True)
                if self.peek() == ",":
                    self.advance()
        elif c == "{":
            self.advance()
            while self.i < self.n:
                self.skip_ws()
                if self.peek() == "}":
                    self.advance()
                    break
                at = self.pos()
                key = self.read_key()
                if not key:
                    self.advance()
                    continue
                self.out.setdefault((*path, *key), at)
                self.defined.append(((*path, *key), at))
                self.skip_ws()
                if self.peek() == "=":
                    self.advance()
                self.read_value((*path, *key))
                self.skip_ws()
                if self.peek() == ",":
                    self.advance()
        else:
            while self.i < self.n and self.peek() not in ",]}\n#":
                self.advance()
            self.spans.setdefault(path, (start, len(self.s[start:self.i].rstrip()) + start))

    def header_path(self, keys: list[str]) -> KeyPath:
        out: list[str | int] = []
        for j, k in enumerate(keys):
            out.append(k)
            prefix = tuple(keys[: j + 1])
            if prefix in self.aot and j < len(keys) - 1:
                out.append(self.aot[prefix])
        return tuple(out)

    # -- document ----------------------------------------------------------------------
    def scan(self) -> dict[KeyPath, tuple[int, int]]:
        table: KeyPath = ()
        while self.i < self.n:
            self.skip_ws(newlines=True)
            if self.i >= self.n:
                break
            at = self.pos()
            if self.peek() == "[":
                array = self.peek(1) == "["
                self.advance(2 if array else 1)
                keys = self.read_key()
                if array:
                    t = tuple(keys)
                    self.aot[t] = self.aot.get(t, -1) + 1
                    table = (*self.header_path(keys), self.aot[t])
                    self.out.setdefault(table[:-1], at)
                    if self.aot[t] == 0:
                        self.defined.append((table[:-1], at))
                else:
                    table = self.header_path(keys)
                    self.defined.append((table, at))
                self.out.setdefault(table, at)
                self.skip_line()
                continue
            keys = self.read_key()
            if not keys:
                self.skip_line()
                continue
            full = (*table, *keys)
            self.out.setdefault(full, at)
            self.defined.append((full, at))
            self.skip_ws()
            if self.peek() == "=":
                self.advance()
            self.read_value(full)
            self.skip_line()
        return self.out
