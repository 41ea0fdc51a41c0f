"""TOML files with the line of every key, so errors can point at the line to fix.

``tomllib`` gives values but no positions. After it has accepted a file, a small scanner
walks the same text and records where each key, table and array element starts. It trusts
the text to be valid TOML (tomllib said so) and never raises on odd input: a position it
cannot find is simply not recorded.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from sparktui.core.errors import ConfigError, Problem, display_path

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

    @property
    def display(self) -> str | None:
        return display_path(self.path)

    def line_of(self, path: Sequence[str | int]) -> tuple[int | None, int | None]:
        """The line and column of ``path``, or of its nearest recorded ancestor."""
        p = tuple(path)
        while p:
            if p in self.positions:
                return self.positions[p]
            p = p[:-1]
        return (None, None)

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
    """Parse ``text``; a syntax error becomes ``error`` naming the line and column."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line = col = None
        m = _SYNTAX_POS.search(message)
        if m:
            line, col = int(m.group(1)), int(m.group(2))
            message = _SYNTAX_POS.sub("", message).strip()
        raise error(
            [Problem(f"TOML syntax error: {message}", line=line, column=col, code="syntax",
                     file=display_path(path))]
        ) from None
    source = TomlSource(data=data, text=text, path=path)
    try:
        source.positions = _Scanner(text).scan()
    except Exception:  # the scanner is best effort; a missing line is not worth a crash
        source.positions = {}
    return source


def read_toml(path: Path, error: type[ConfigError] = ConfigError) -> TomlSource:
    """Read and parse a TOML file; a missing or unreadable file is ``error``, not a traceback."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise error([Problem("file not found", code="io", file=display_path(path))]) from None
    except IsADirectoryError:
        raise error([Problem("is a folder, not a TOML file", code="io",
                             file=display_path(path))]) from None
    except OSError as exc:
        raise error([Problem(f"cannot read: {exc.strerror}", code="io",
                             file=display_path(path))]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error([Problem(f"not UTF-8 text (byte {exc.start})", code="io",
                             file=display_path(path))]) from None
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

    # -- low level ---------------------------------------------------------------------
    def pos(self) -> tuple[int, int]:
        return (self.line, self.i - self.line_start + 1)

    def advance(self, k: int = 1) -> None:
        for _ in range(k):
            if self.i < self.n and self.s[self.i] == "\n":
                self.line += 1
                self.line_start = self.i + 1
            self.i += 1

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < self.n else ""

    def skip_ws(self, newlines: bool = False) -> None:
        while self.i < self.n:
            c = self.s[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.advance()
            elif c == "#":
                while self.i < self.n and self.s[self.i] != "\n":
                    self.advance()
            else:
                break

    def skip_line(self) -> None:
        while self.i < self.n and self.s[self.i] != "\n":
            self.advance()

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
        if c in "\"'":
            self.read_string()
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
                else:
                    table = self.header_path(keys)
                self.out.setdefault(table, at)
                self.skip_line()
                continue
            keys = self.read_key()
            if not keys:
                self.skip_line()
                continue
            full = (*table, *keys)
            self.out.setdefault(full, at)
            self.skip_ws()
            if self.peek() == "=":
                self.advance()
            self.read_value(full)
            self.skip_line()
        return self.out
