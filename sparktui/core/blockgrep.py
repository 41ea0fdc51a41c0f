"""Where in a block of a run's lines to look for the lines a grep keeps.

The matching rules stay in ``core.linefilter`` (smart case, ``!`` inverts): this module only
decides *where to look*, with a search that never misses a line the filter keeps, and hands every
line it cannot vouch for to the filter's own regex. ``BlockSearch.of`` reads the parsed pattern:

- ``full``: the filter's regex itself, when it holds no anchor or lookaround (they would see the
  block around a line, not the line) and cannot match a newline (a match then never spans two
  lines). A hit inside a line's text is a match of that text; a hit in the time stamp is
  searched again from the text's start, with the line's end as the end of the string. The
  regex is searched as ``(?:regex)[^\\n]*``: a match then ends where its line ends, and no
  ``find`` per hit looks for it (``_line_finder``).
- ``literal``: a literal every match contains (``error`` in ``^.*error:``, one per branch of an
  alternation), searched with the regex's case rule; each line it hits goes to the filter.
- ``lines``: no such literal (``^\\s*$``): every line goes to the filter, still read in blocks.

A block of ASCII text is searched as bytes when the pattern means the same there: every character
it names is ASCII and no ``\\s`` with Unicode's meaning (which holds ``\\x1c``-``\\x1f``); any other
block is decoded first and searched with the filter's own regex. Ignoring case over bytes, a
literal that starts with a letter is found in the block lowercased (``bytes.lower`` and a plain
search: five times faster than the regex engine's case-folding scan), each hit then checked.
Where a line in three matched the block before (``dense``), every line is tested instead.

A block is whole lines (``core.rungrep.blocks``), ``<ts>\\t<text>`` each, the filter applied to
the text; a line without a tab is all time stamp, its text empty.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable

from sparktui.core.linefilter import LineFilter, quiet_regex

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from typing import Any, AnyStr, Final, Literal

    Mode = Literal["all", "full", "literal", "lines"]


def _module(name: str, before_3_11: str) -> Any:
    """The standard library's regex parser: ``re._parser`` since 3.11, ``sre_parse`` before
    (the new name has no type stubs: it is private, and read here only to look, never to
    match: a parse this module does not understand means "check every line")."""
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module(before_3_11)


_sre = _module("re._constants", "sre_constants")
_sre_parse = _module("re._parser", "sre_parse")

Span = tuple[int, int, int]
"""A kept line: ``(start, tab, end)`` in its buffer; ``tab`` is -1 when the line has none (then
all of it is the time stamp and its text is empty); ``end`` is where its ``\\n`` is."""


# -- what the pattern allows ------------------------------------------------------------------
_NEWLINE: Final = 10
_BOUNDARIES = {_sre.AT_BOUNDARY, _sre.AT_NON_BOUNDARY}
_SPACES = {_sre.CATEGORY_SPACE, _sre.CATEGORY_NOT_SPACE}
_CATEGORY_HAS_NEWLINE = {
    _sre.CATEGORY_SPACE: True, _sre.CATEGORY_NOT_SPACE: False,
    _sre.CATEGORY_DIGIT: False, _sre.CATEGORY_NOT_DIGIT: True,
    _sre.CATEGORY_WORD: False, _sre.CATEGORY_NOT_WORD: True,
    _sre.CATEGORY_LINEBREAK: True, _sre.CATEGORY_NOT_LINEBREAK: False,
}
_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", _sre.MAX_REPEAT)}
_ATOMIC = getattr(_sre, "ATOMIC_GROUP", None)


class _Facts:
    """What a walk over the parsed pattern found."""

    def __init__(self) -> None:
        self.anchored = False  # an anchor or a lookaround: the block around a line would count
        self.newline = False  # some part can match "\n": a match could span lines
        self.ascii = True  # every character it names is ASCII
        self.unicode_space = False  # \s or \S, whose Unicode meaning holds \x1c-\x1f
        self.unknown = False  # a construct this walk does not know: trust nothing


def _walk(data: Iterable[tuple[Any, Any]], dotall: bool, facts: _Facts) -> None:
    r"""Everything that matters about a parsed pattern, into ``facts``. ``\b`` and ``\B`` are no
    anchors here: a line's text sits between a tab and a newline in the block, neither a word
    character, just as nothing is before and after a string."""
    for op, av in data:
        if op is _sre.LITERAL or op is _sre.NOT_LITERAL:
            facts.newline = facts.newline or (av == _NEWLINE) == (op is _sre.LITERAL)
            facts.ascii = facts.ascii and av < 128
        elif op is _sre.ANY:
            facts.newline = facts.newline or dotall
        elif op is _sre.IN:
            facts.newline = _class_has_newline(av, facts) or facts.newline
        elif op in _REPEATS:
            _walk(av[2], dotall, facts)
        elif op is _sre.SUBPATTERN:
            _group, add, remove, sub = av
            _walk(sub, (dotall or bool(add & re.DOTALL)) and not remove & re.DOTALL, facts)
        elif op is _sre.BRANCH:
            for sub in av[1]:
                _walk(sub, dotall, facts)
        elif op is _ATOMIC:
            _walk(av, dotall, facts)
        elif op is _sre.GROUPREF:
            pass  # it matches what its group matched
        elif op is _sre.GROUPREF_EXISTS:
            _walk(av[1], dotall, facts)
            if av[2] is not None:
                _walk(av[2], dotall, facts)
        elif op is _sre.AT:
            facts.anchored = facts.anchored or av not in _BOUNDARIES
        elif op is _sre.ASSERT or op is _sre.ASSERT_NOT:
            facts.anchored = True
            _walk(av[1], dotall, facts)
        else:
            facts.unknown = True


def _class_has_newline(items: list[tuple[Any, Any]], facts: _Facts) -> bool:
    negate = has = False
    for op, av in items:
        if op is _sre.NEGATE:
            negate = True
        elif op is _sre.LITERAL:
            has = has or av == _NEWLINE
            facts.ascii = facts.ascii and av < 128
        elif op is _sre.RANGE:
            has = has or av[0] <= _NEWLINE <= av[1]
            facts.ascii = facts.ascii and av[1] < 128
        elif op is _sre.CATEGORY and av in _CATEGORY_HAS_NEWLINE:
            facts.unicode_space = facts.unicode_space or av in _SPACES
            has = has or _CATEGORY_HAS_NEWLINE[av]
        else:
            facts.unknown = True
    return has != negate


def _required(data: list[tuple[Any, Any]]) -> list[str] | None:
    """Literals one of which every match contains (None: no such set). In a sequence the best
    of its runs of plain characters, its groups and its alternations (one literal from each
    branch); groups with flags of their own are not looked into."""
    best: list[str] | None = None

    def consider(found: list[str] | None) -> None:
        nonlocal best
        if found and all(found) and (best is None or min(map(len, found)) > min(map(len, best))):
            best = found

    run: list[str] = []
    for op, av in data:
        if op is _sre.LITERAL:
            run.append(chr(av))
            continue
        consider(["".join(run)] if run else None)
        run = []
        if op is _sre.SUBPATTERN and not av[1] and not av[2]:
            consider(_required(av[3]))
        elif op is _ATOMIC:
            consider(_required(av))
        elif op is _sre.BRANCH:
            branches = [_required(sub) for sub in av[1]]
            if all(branches):
                consider(sorted({lit for branch in branches if branch for lit in branch}))
        elif op in _REPEATS and av[0] >= 1:
            consider(_required(av[2]))
    consider(["".join(run)] if run else None)
    return best


def _starts_uncased(data: list[tuple[Any, Any]]) -> bool:
    """Whether the pattern starts with a character that has no case: the regex engine then
    scans for it at memory speed even when ignoring case (it cannot for a letter)."""
    return bool(data) and data[0][0] is _sre.LITERAL and chr(data[0][1]).lower() == chr(data[0][1]).upper()


def _line_finder(regex: re.Pattern[AnyStr]) -> tuple[re.Pattern[AnyStr], bool]:
    """``regex`` as ``(?:regex)[^\\n]*``, whose matches end where their line ends (for a regex
    that cannot match a newline), and True; ``regex`` itself and False where the wrapped text
    does not compile the same way (global flags such as ``(?i)`` must stay at the start, and a
    verbose pattern's comment would swallow the rest)."""
    if regex.flags & re.VERBOSE:
        return regex, False
    pattern: Any = regex.pattern
    wrapped: Any = ("(?:" + pattern + ")[^\\n]*" if isinstance(pattern, str)
                    else b"(?:" + pattern + b")[^\\n]*")
    try:
        return re.compile(wrapped, regex.flags), True
    except re.error:
        return regex, False


class _Way:
    """How to search one kind of block (bytes or text). The classes here are plain, not
    NamedTuples: ``typing`` is not imported on the path of ``sparktui logs``."""

    __slots__ = ("check", "ends", "exact", "finder", "lower")

    def __init__(self, finder: re.Pattern[Any] | None, exact: bool, lower: bool,
                 check: Callable[[Any], bool]) -> None:
        self.ends = False  # a hit's match ends where its line ends (``_line_finder``)
        if exact and finder is not None:
            finder, self.ends = _line_finder(finder)
        self.finder = finder  # None: every line goes to the check
        self.exact = exact  # a hit in a line's text is a match (the finder is the filter's regex)
        self.lower = lower  # search the block lowercased (the finder is a lowercase literal)
        self.check = check  # the filter's regex on one line's text: matched or not


class BlockSearch:
    """Where in a block of lines to look for the lines ``line_filter`` keeps (see the module)."""

    __slots__ = ("ascii", "line_filter", "mode", "text")

    def __init__(self, line_filter: LineFilter, mode: Mode, text: _Way | None = None,
                 ascii: _Way | None = None) -> None:
        self.line_filter = line_filter
        self.mode = mode
        self.text = text  # over a decoded block
        self.ascii = ascii  # over an ASCII block as bytes; None: decode it too

    @classmethod
    def of(cls, line_filter: LineFilter) -> BlockSearch:
        with quiet_regex():
            return cls._of(line_filter)

    @classmethod
    def _of(cls, line_filter: LineFilter) -> BlockSearch:
        regex = line_filter.regex
        if regex is None or line_filter.error is not None:
            return cls(line_filter, "all")
        search = regex.search
        check: Callable[[Any], bool] = lambda text: search(text) is not None  # noqa: E731
        try:
            parsed = _sre_parse.parse(regex.pattern, regex.flags)
        except Exception:  # the parser of another Python: check every line
            return cls(line_filter, "lines", _Way(None, False, False, check))
        flags = int(parsed.state.flags)
        facts = _Facts()
        _walk(parsed.data, bool(flags & re.DOTALL), facts)
        literals = None if facts.unknown else _required(list(parsed.data))
        if facts.unknown:
            mode: Mode = "lines"
        elif not facts.anchored and not facts.newline:
            mode = "full"
        else:
            mode = "literal" if literals else "lines"
        case = flags & (re.IGNORECASE | re.ASCII)
        if mode == "full":
            text = _Way(regex, True, False, check)
        elif mode == "literal" and literals:
            text = _Way(re.compile("|".join(map(re.escape, literals)), case), False, False, check)
        else:
            text = _Way(None, False, False, check)
        if not facts.ascii or facts.unknown or (facts.unicode_space and not flags & re.ASCII):
            return cls(line_filter, mode, text)
        try:
            regex_b = re.compile(regex.pattern.encode("ascii"), regex.flags & ~re.UNICODE)
        except (UnicodeEncodeError, re.error, ValueError):
            return cls(line_filter, mode, text)
        search_b = regex_b.search
        check_b: Callable[[Any], bool] = lambda text: search_b(text) is not None  # noqa: E731
        folds = bool(flags & re.IGNORECASE) and literals is not None and any(
            ch.isalpha() for lit in literals for ch in lit)
        if folds and literals and not (mode == "full" and _starts_uncased(list(parsed.data))):
            lowered = re.compile("|".join(re.escape(lit.lower()) for lit in literals).encode("ascii"))
            ascii_way = _Way(lowered, False, True, check_b)
        elif mode == "full":
            ascii_way = _Way(regex_b, True, False, check_b)
        elif text.finder is not None:
            ascii_way = _Way(re.compile(text.finder.pattern.encode("ascii"), case), False, False, check_b)
        else:
            ascii_way = _Way(None, False, False, check_b)
        return cls(line_filter, mode, text, ascii_way)

    # -- one block ------------------------------------------------------------------------------
    def kept(self, data: bytes, lo: int = 0, hi: int | None = None, *, dense: bool = False) -> Kept:
        """The lines of ``data[lo:hi]`` (whole lines) the filter keeps, in order, with the
        buffer their spans index: ``data`` itself when it is ASCII and the pattern means the
        same over bytes, else the region decoded. ``dense``: most lines match (the last block
        said so), so test each line instead of expanding a hit per line."""
        hi = len(data) if hi is None else hi
        if self.mode == "all":
            if data.isascii():
                return Kept(data, lo, hi, _every_line(data, lo, hi), hi - lo)
            text = data[lo:hi].decode("utf-8", "replace")
            return Kept(text, 0, len(text), _every_line(text, 0, len(text)), len(text))
        if self.ascii is not None and data.isascii():
            return self._kept(self.ascii, data, lo, hi, dense)
        assert self.text is not None
        text = data[lo:hi].decode("utf-8", "replace")
        return self._kept(self.text, text, 0, len(text), dense)

    def _kept(self, way: _Way, buf: AnyStr, lo: int, hi: int, dense: bool) -> Kept:
        invert = self.line_filter.invert
        if way.finder is None or dense:
            spans, matched = _each_line(buf, lo, hi, way.check, invert)
            return Kept(buf, lo, hi, spans, matched)
        hay: Any = buf.lower() if way.lower else buf
        found = _search(buf, hay, lo, hi, way)
        return Kept(buf, lo, hi, _others(buf, lo, hi, found) if invert else found, len(found))


class Kept:
    """What a block holds for the filter: ``spans`` index ``buf``, whose lines are ``lo:hi``."""

    __slots__ = ("buf", "hi", "lo", "matched", "spans")

    def __init__(self, buf: bytes | str, lo: int, hi: int, spans: list[Span], matched: int) -> None:
        self.buf = buf
        self.lo = lo
        self.hi = hi
        self.spans = spans
        self.matched = matched  # lines the pattern matched (kept or, inverted, dropped)

    def dense(self, before: bool) -> bool:
        """Whether to test every line of the next block: a line in three or more of this one
        matched (a line is about 140 bytes), so testing each line is cheaper than a search and
        an expansion per hit. A small block keeps ``before``, the last answer (``DECIDES``)."""
        size = self.hi - self.lo
        return before if size < DECIDES else self.matched * 400 > size


DECIDES: Final = 1 << 10
"""A block smaller than this (a line or a few) says nothing about the next: a read's cut line
comes as a block of its own, and one such line that matched made the next whole block go line
by line."""


def _text(buf: AnyStr, span: Span) -> AnyStr:
    _start, t, end = span
    return buf[t + 1:end] if t >= 0 else buf[end:end]


def _search(buf: AnyStr, hay: AnyStr, lo: int, hi: int, way: _Way) -> list[Span]:
    """Hits of ``way.finder`` in ``hay`` (``buf`` or ``buf`` lowercased: the same positions),
    each expanded to its line in ``buf`` and kept when it is a match of the line's text
    (``exact``) or ``way.check`` says so."""
    nl: Any = b"\n" if isinstance(buf, bytes) else "\n"
    tab: Any = b"\t" if isinstance(buf, bytes) else "\t"
    finder = way.finder
    assert finder is not None
    search, find, rfind, check, exact = finder.search, buf.find, buf.rfind, way.check, way.exact
    ends = way.ends
    past = hi if buf[hi - 1:hi] == nl else hi + 1  # a hit here is after the last line
    out: list[Span] = []
    pos = lo
    while pos < hi:
        m = search(hay, pos, hi)
        if m is None:
            break
        hit, end = m.span()
        if hit >= past:
            break
        start = rfind(nl, lo, hit) + 1 or lo
        if not ends:
            end = find(nl, hit, hi)
            if end < 0:
                end = hi
        t = find(tab, start, end)
        if exact and 0 <= t < end - 1:
            # in the text: a match; in the time stamp: search the text alone (the line's end
            # as the string's end; before its start a tab, which nothing here can see). An
            # empty text goes to the check: \B never matches in an empty string
            if t < hit or search(buf, t + 1, end) is not None:
                out.append((start, t, end))
        elif check(buf[t + 1:end] if t >= 0 else buf[end:end]):
            out.append((start, t, end))
        pos = end + 1
    return out


def _each_line(buf: AnyStr, lo: int, hi: int, check: Callable[[Any], bool],
               invert: bool) -> tuple[list[Span], int]:
    """Every line of ``buf[lo:hi]`` through ``check``: the kept ones, and how many matched."""
    nl: Any = b"\n" if isinstance(buf, bytes) else "\n"
    tab: Any = b"\t" if isinstance(buf, bytes) else "\t"
    lines = buf[lo:hi].split(nl)
    if buf[hi - 1:hi] == nl:
        lines.pop()  # after the last newline: no line
    out: list[Span] = []
    append = out.append
    pos = lo
    for line in lines:
        stamp, sep, text = line.partition(tab)
        end = pos + len(line)
        if check(text) != invert:
            append((pos, pos + len(stamp) if sep else -1, end))
        pos = end + 1
    matched = len(out) if not invert else len(lines) - len(out)
    return out, matched


def _every_line(buf: AnyStr, lo: int, hi: int) -> list[Span]:
    nl: Any = b"\n" if isinstance(buf, bytes) else "\n"
    tab: Any = b"\t" if isinstance(buf, bytes) else "\t"
    out: list[Span] = []
    append, find = out.append, buf.find
    start = lo
    while start < hi:
        end = find(nl, start, hi)
        if end < 0:
            end = hi
        append((start, find(tab, start, end), end))
        start = end + 1
    return out


def _others(buf: AnyStr, lo: int, hi: int, found: list[Span]) -> list[Span]:
    """Every line of ``buf[lo:hi]`` but ``found`` (in order): what an inverted filter keeps."""
    out: list[Span] = []
    at = lo
    for start, _t, end in found:
        out += _every_line(buf, at, start)
        at = end + 1
    out += _every_line(buf, at, hi)
    return out
