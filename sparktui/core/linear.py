"""The operator's regexes (boot checks, the console's grep, ``sparktui logs --grep``) in RE2.

Python's ``re`` backtracks: ``(a+)+$`` over a line of 24 ``a`` and a ``!`` took 2.95 s, four
times more for each two more characters, on the event loop. RE2 (``google-re2``) matches in time
linear in the text, whatever the pattern, because it never backtracks; the price is that it
has no backreferences and no lookaround, and those are refused with a sentence naming them.

Every regex here is compiled with ``never_nl``: no match holds a ``\\n``. A log line never
holds one, so a line matches exactly as it would without it, and a search over a block of
lines never finds a match that spans two of them. ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are
RE2's: ASCII (``\\s`` is ``[\\t\\n\\f\\r ]``); case is folded the Unicode way (``k`` matches the
Kelvin sign). Text is searched as UTF-8; the module answers in character offsets for ``str``.
"""

from __future__ import annotations

# the C++ binding itself: the package's Python wrapper encodes a str text again on every call
# and builds its match objects in Python (1.5 us a line against 0.9 us)
from re2 import _re2

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_UNANCHORED: Any = _re2.RE2.Anchor.UNANCHORED
_NO_MATCH = (-1, -1)

# RE2's error for a construct it lacks, and what to tell the operator instead. Checked in order,
# against what RE2 said and what it was said about (RE2 names the construct after ``: ``).
_ENGINE = "patterns run in a linear-time engine"
_REFUSED: tuple[tuple[str, str], ...] = (
    ("(?P=", f"named backreferences ((?P=name)) are not supported: {_ENGINE}"),
    ("(?=", f"lookahead ((?=...)) is not supported: {_ENGINE}"),
    ("(?!", f"negative lookahead ((?!...)) is not supported: {_ENGINE}"),
    ("(?<=", f"lookbehind ((?<=...)) is not supported: {_ENGINE}"),
    ("(?<!", f"negative lookbehind ((?<!...)) is not supported: {_ENGINE}"),
    ("(?>", f"atomic groups ((?>...)) are not supported: {_ENGINE} (nothing backtracks)"),
    ("(?(", f"conditional groups ((?(1)...)) are not supported: {_ENGINE}"),
    ("(?#", "comments ((?#...)) are not supported"),
    ("(?x", "verbose patterns ((?x)) are not supported"),
    ("(?a", "the (?a) flag is not supported: \\d, \\w, \\s and \\b are always ASCII here"),
    ("(?u", "the (?u) flag is not supported: \\d, \\w, \\s and \\b are always ASCII here"),
    ("(?L", "the (?L) flag is not supported"),
    ("*+", f"possessive quantifiers (*+, ++, ?+) are not supported: {_ENGINE} (nothing backtracks)"),
    ("++", f"possessive quantifiers (*+, ++, ?+) are not supported: {_ENGINE} (nothing backtracks)"),
    ("?+", f"possessive quantifiers (*+, ++, ?+) are not supported: {_ENGINE} (nothing backtracks)"),
    ("\\Z", "\\Z is not supported: write $ (or \\z) for the end of the line"),
    ("\\u", "\\u is not supported: write \\x{00e9} for a character by its code"),
    ("\\U", "\\U is not supported: write \\x{1f600} for a character by its code"),
    ("\\N", "\\N{...} is not supported: write \\x{00e9} for a character by its code"),
)
_BACKREFERENCE = f"backreferences (\\1) are not supported: {_ENGINE}"


class PatternError(ValueError):
    """A pattern RE2 will not run: ``msg``, and ``pos`` where it went wrong when known;
    ``str(exc)`` is the sentence to show."""

    def __init__(self, msg: str, pos: int | None = None) -> None:
        super().__init__(msg if pos is None else f"{msg} at position {pos}")
        self.msg = msg
        self.pos = pos


class Regex:
    """A compiled pattern: ``search`` and ``spans`` over a ``str``, ``find`` over UTF-8 bytes.
    ``pattern`` is what was compiled (for a smart-case grep: the text, its case rule apart in
    ``ignore_case``). Compared and hashed by those two."""

    __slots__ = ("_match", "ignore_case", "pattern")

    def __init__(self, pattern: str, ignore_case: bool = False) -> None:
        self.pattern = pattern
        self.ignore_case = ignore_case
        self._match = _compile(pattern, ignore_case).Match

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Regex) and (self.pattern, self.ignore_case) == (
            other.pattern, other.ignore_case)

    def __hash__(self) -> int:
        return hash((self.pattern, self.ignore_case))

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r}, ignore_case={self.ignore_case})"

    def raw(self) -> tuple[Callable[[Any, Any, int, int], list[tuple[int, int]]], Any]:
        """RE2's own match and its ``anchor`` argument, for a loop that calls it per hit (a
        method between them costs 0.15 us a call): ``match(anchor, data, pos, endpos)[0]`` is
        ``find(data, pos, endpos)``."""
        return self._match, _UNANCHORED

    def find(self, data: bytes, pos: int = 0, endpos: int | None = None) -> tuple[int, int]:
        """The first match in ``data[pos:endpos]`` (``data`` as the context of ``^`` and
        ``\\b``), as byte offsets; ``(-1, -1)`` when there is none."""
        span: tuple[int, int] = self._match(_UNANCHORED, data, pos,
                                            len(data) if endpos is None else endpos)[0]
        return span

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in ``text``."""
        data = text.encode("utf-8", "surrogatepass")
        return bool(self._match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)

    def search_bytes(self, data: bytes) -> bool:
        return bool(self._match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the pattern matches in ``text``, left to right, empty matches left out, as
        character offsets."""
        data = text.encode("utf-8", "surrogatepass")
        ascii = len(data) == len(text)
        out: list[tuple[int, int]] = []
        pos, size = 0, len(data)
        while pos <= size:
            start, end = self._match(_UNANCHORED, data, pos, size)[0]
            if start < 0:
                break
            if end > start:
                out.append((start, end) if ascii else (_chars(data, start), _chars(data, end)))
                pos = end
            else:  # an empty match: step over one character
                pos = end + 1
                while pos < size and data[pos] & 0xC0 == 0x80:
                    pos += 1
        return out


def _chars(data: bytes, offset: int) -> int:
    """Characters in ``data[:offset]`` (an offset RE2 gave: a character's first byte)."""
    return len(data[:offset].decode("utf-8", "surrogatepass"))


def _options(ignore_case: bool) -> Any:
    options = _re2.RE2.Options()
    options.never_nl = True
    options.never_capture = True  # a match's span is all that is read
    options.case_sensitive = not ignore_case
    options.log_errors = False  # RE2 would print its errors to stderr, over the console
    return options


def _compile(pattern: str, ignore_case: bool) -> Any:
    if "\\C" in pattern.replace("\\\\", ""):
        raise PatternError("\\C (any byte) is not supported: lines are searched as UTF-8 text")
    compiled = _re2.RE2(pattern.encode("utf-8", "surrogatepass"), _options(ignore_case))
    if not compiled.ok():
        error = compiled.error().decode("utf-8", "replace")
        sentence = refusal(pattern, error)
        if sentence == error:  # a plain syntax error: Python's parser says where, if it sees it
            where = _python_syntax_error(pattern)
            if where is not None:
                raise PatternError(*where)
        raise PatternError(sentence)
    return compiled


def _python_syntax_error(pattern: str) -> tuple[str, int | None] | None:
    """Python's words and position for a pattern its parser rejects too (it only parses here,
    in time linear in the pattern: nothing is matched with it); None where it reads it."""
    import re
    import warnings

    parser: Any = getattr(re, "_parser", None) or __import__("sre_parse")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parser.parse(pattern)
    except re.error as exc:
        return exc.msg, exc.pos
    except Exception:  # another Python's parser: RE2's words will do
        return None
    return None


def compile(pattern: str, *, ignore_case: bool = False) -> Regex:
    """``pattern`` for RE2; raises ``PatternError`` with a sentence when RE2 refuses it."""
    return Regex(pattern, ignore_case)


def literal(text: str, *, ignore_case: bool = False) -> Regex:
    """A regex for ``text`` as it is (no character special)."""
    return Regex(escape(text), ignore_case)


def escape(text: str) -> str:
    return str(_re2.RE2.QuoteMeta(text.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass"))


def refusal(pattern: str, error: str) -> str:
    """The sentence for a pattern RE2 refused with ``error`` (``kind: the construct``)."""
    kind, _, construct = error.partition(": ")
    if kind == "invalid escape sequence" and construct[1:2].isdigit() and construct[1:2] != "0":
        return _BACKREFERENCE
    for start, sentence in _REFUSED:
        # RE2 names a Perl group by its first three characters: ``(?P`` for ``(?P=name)``
        if construct.startswith(start) or (len(construct) == 3 and start.startswith(construct)
                                           and start in pattern):
            return sentence
    if kind == "invalid repetition size":
        return f"invalid repetition {construct}: counts go from the lower to the higher, up to 1000"
    return error
