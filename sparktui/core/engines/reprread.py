"""A reader of Python literal reprs as engines print their arguments (``ServerArgs(...)``, a
dict), without ``eval``: a container prints whatever it likes, so its text is parsed here and
never run. What it cannot read inside a value is kept as raw text for that value; a text that
is cut off, too long or too deep is refused with a reason (``ReprError``), never an exception
of another kind.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_TEXT = 256 * 1024  # a seed's SGLang repr is 16.6 KB; more is not an argument dump
MAX_DEPTH = 32  # nesting the engines print: 3 (a dict in a list in a field)


class ReprError(ValueError):
    """Why a repr could not be read (a sentence with the offset)."""


class _Limit(ReprError):
    """Past a limit, or at the end of the text: no value is kept raw after it."""


class CutOff(_Limit):
    """The text ended inside a value: a dump's first piece, or a truncated one."""


@dataclass(frozen=True)
class Call:
    """``Name(arg, key=value)``: a dataclass's or a class's repr."""

    name: str
    args: tuple[object, ...]
    kwargs: dict[str, object]


@dataclass(frozen=True)
class EnumValue:
    """``<Color.RED: 'red'>``."""

    name: str
    value: object


@dataclass(frozen=True)
class Raw:
    """A value this reader does not understand, as printed (``<function f at 0x7f>``)."""

    text: str


_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
_CLOSE = {"(": ")", "[": "]", "{": "}", "<": ">"}
_NAMES: dict[str, object] = {"True": True, "False": False, "None": None,
                             "inf": float("inf"), "nan": float("nan")}


def _is_name(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class _Reader:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def fail(self, why: str) -> ReprError:
        if self.i >= len(self.s):
            return CutOff(f"cut off after {len(self.s)} characters ({why})")
        return ReprError(f"{why} at character {self.i}")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def at(self, chars: str) -> bool:
        """Whether the next character is one of ``chars`` (never at the end)."""
        return self.i < len(self.s) and self.s[self.i] in chars

    def space(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def expect(self, ch: str) -> None:
        self.space()
        if self.peek() != ch:
            raise self.fail(f"expected {ch!r}")
        self.i += 1

    def value(self, depth: int) -> object:
        if depth > MAX_DEPTH:
            raise _Limit(f"nested deeper than {MAX_DEPTH} at character {self.i}")
        self.space()
        ch = self.peek()
        if not ch:
            raise self.fail("expected a value")
        if ch in "'\"":
            return self.string("")
        if ch in "-+." or ch.isdigit():
            return self.number()
        if ch == "[":
            return self.sequence("]", depth)
        if ch == "(":
            items = self.sequence(")", depth)
            return tuple(items)
        if ch == "{":
            return self.braces(depth)
        if ch == "<":
            return self.angle(depth)
        if _is_name(ch):
            return self.name(depth)
        return self.raw()

    def string(self, prefix: str) -> str:
        quote = self.s[self.i]
        triple = self.s.startswith(quote * 3, self.i)
        end = quote * 3 if triple else quote
        self.i += len(end)
        raw = "r" in prefix.lower()
        out: list[str] = []
        s = self.s
        while True:
            if self.i >= len(s):
                raise self.fail("unterminated string")
            if s.startswith(end, self.i):
                self.i += len(end)
                return "".join(out)
            ch = s[self.i]
            if ch != "\\":
                out.append(ch)
                self.i += 1
                continue
            if self.i + 1 >= len(s):
                raise self.fail("unterminated string")
            nxt = s[self.i + 1]
            if raw:
                out.append(ch + nxt)
                self.i += 2
                continue
            self.i += 2
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
            elif nxt in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[nxt]
                digits = s[self.i:self.i + width]
                if len(digits) != width or any(c not in "0123456789abcdefABCDEF" for c in digits):
                    raise self.fail(f"bad \\{nxt} escape")
                code = int(digits, 16)
                if code > 0x10FFFF:
                    raise self.fail("escape beyond unicode")
                out.append(chr(code))
                self.i += width
            elif nxt in "01234567":
                j = self.i
                while j < len(s) and j < self.i + 2 and s[j] in "01234567":
                    j += 1
                out.append(chr(int(nxt + s[self.i:j], 8)))
                self.i = j
            elif nxt == "N" and self.peek() == "{":
                close = s.find("}", self.i)
                if close < 0:
                    raise self.fail("unterminated \\N{...}")
                out.append(s[self.i - 2:close + 1])  # the name kept as written
                self.i = close + 1
            else:
                out.append("\\" + nxt)

    def number(self) -> object:
        start = self.i
        s = self.s
        if self.at("+-"):
            self.i += 1
            if s.startswith("inf", self.i) or s.startswith("nan", self.i):
                self.i += 3
                return float(s[start:self.i])
        while self.i < len(s) and (s[self.i].isalnum() or s[self.i] in "._" or
                                   (s[self.i] in "+-" and s[self.i - 1] in "eE")):
            self.i += 1
        text = s[start:self.i]
        try:
            return int(text, 0) if text.lstrip("+-").isdigit() or text[:2].lower() in (
                "0x", "0o", "0b") else float(text)
        except ValueError:
            if text.endswith("j"):
                return Raw(text)
            self.i = start
            raise self.fail(f"bad number {text[:40]!r}") from None

    def sequence(self, close: str, depth: int) -> list[object]:
        self.i += 1
        items: list[object] = []
        while True:
            self.space()
            if self.peek() == close:
                self.i += 1
                return items
            items.append(self.value(depth + 1))
            self.space()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != close:
                raise self.fail(f"expected ',' or {close!r}")

    def braces(self, depth: int) -> object:
        """A dict, or a set (``{1, 2}``; ``set()`` is a call)."""
        self.i += 1
        self.space()
        if self.peek() == "}":
            self.i += 1
            return {}
        first = self.value(depth + 1)
        self.space()
        if self.peek() != ":":
            items = [first]
            while self.peek() == ",":
                self.i += 1
                self.space()
                if self.peek() == "}":
                    break
                items.append(self.value(depth + 1))
                self.space()
            self.expect("}")
            return items
        out: dict[object, object] = {}
        key = first
        while True:
            self.expect(":")
            out[_hashable(key)] = self.value(depth + 1)
            self.space()
            if self.peek() == ",":
                self.i += 1
                self.space()
            if self.peek() == "}":
                self.i += 1
                return out
            key = self.value(depth + 1)

    def angle(self, depth: int) -> object:
        """``<Enum.X: 'x'>`` as an enum, any other ``<...>`` as raw text."""
        start = self.i
        j = self.i + 1
        while j < len(self.s) and (_is_name(self.s[j]) or self.s[j] == "."):
            j += 1
        if self.s.startswith(": ", j) and j > self.i + 1:
            name = self.s[self.i + 1:j]
            self.i = j + 2
            value = self.value(depth + 1)
            self.expect(">")
            return EnumValue(name, value)
        self.i = start
        return self.raw()

    def name(self, depth: int) -> object:
        start = self.i
        while self.i < len(self.s) and (_is_name(self.s[self.i]) or self.s[self.i] == "."):
            self.i += 1
        word = self.s[start:self.i]
        if self.at("'\"") and word.lower() in ("r", "u", "b", "br", "rb", "f", "rf", "fr"):
            return self.string(word)
        if self.peek() == "(":
            return self.call(word, depth)
        return _NAMES[word] if word in _NAMES else Raw(word)

    def call(self, name: str, depth: int) -> Call:
        self.i += 1
        args: list[object] = []
        kwargs: dict[str, object] = {}
        while True:
            self.space()
            if self.peek() == ")":
                self.i += 1
                return Call(name, tuple(args), kwargs)
            j = self.i
            while j < len(self.s) and _is_name(self.s[j]):
                j += 1
            if j > self.i and self.s[j:j + 1] == "=" and self.s[j + 1:j + 2] != "=":
                key = self.s[self.i:j]
                self.i = j + 1
                kwargs[key] = self.field_value(depth + 1)
            else:
                args.append(self.field_value(depth + 1))
            self.space()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != ")":
                raise self.fail("expected ',' or ')'")

    def field_value(self, depth: int) -> object:
        """A value; what cannot be read is kept raw up to the next ``,`` or bracket."""
        start = self.i
        try:
            value = self.value(depth)
            self.space()
            if self.at(",)"):
                return value
        except _Limit:
            raise
        except ReprError:
            pass
        self.i = start
        return self.raw()

    def raw(self) -> Raw:
        """Text up to the ``,`` or closing bracket that ends this value, brackets and quotes
        balanced."""
        start = self.i
        stack: list[str] = []
        s = self.s
        while self.i < len(s):
            ch = s[self.i]
            if ch in "'\"":
                self.string("")
                continue
            if ch in _CLOSE:
                stack.append(_CLOSE[ch])
            elif stack and ch == stack[-1]:
                stack.pop()
            elif not stack and ch in ",)]}":
                break
            self.i += 1
        if stack or self.i >= len(s):
            raise self.fail("unbalanced value")
        if self.i == start:
            raise self.fail("expected a value")
        return Raw(s[start:self.i].strip())


def _hashable(key: object) -> object:
    try:
        hash(key)
    except TypeError:
        return Raw(repr(key))
    return key


def read(text: str, start: int = 0) -> tuple[object, int]:
    """The value that begins at ``text[start]`` and where it ends; ``ReprError`` with a reason
    when the text is too long, cut off or malformed."""
    if len(text) - start > MAX_TEXT:
        raise ReprError(f"{len(text) - start} characters, more than {MAX_TEXT}")
    reader = _Reader(text)
    reader.i = start
    try:
        value = reader.value(0)
    except RecursionError:  # MAX_DEPTH is far below Python's own limit; kept as a reason
        raise ReprError("nested too deep") from None
    return value, reader.i


def fields(value: object) -> dict[str, object] | None:
    """A dump's fields: a call's keywords, or a dict's string keys."""
    if isinstance(value, Call):
        return dict(value.kwargs)
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if isinstance(k, str)}
    return None
