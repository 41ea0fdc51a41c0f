"""Where in a block of a run's lines to look for the lines a grep keeps.

The matching rules stay in ``core.linefilter`` (smart case, ``!`` inverts, the regex in RE2):
this module only decides *where to look*, with a search that never misses a line the filter
keeps, and hands every line it cannot vouch for to the filter's own regex. ``BlockSearch.of``
reads the pattern:

- ``full``: the filter's regex itself, when it holds no anchor (it would see the block around a
  line, not the line). RE2 never matches a newline here (``core.linear``), so a match never
  spans two lines: a hit inside a line's text is a match of that text; a hit in the time stamp
  is searched again from the text's start. (Searched as ``(?:regex)[^\\n]*``, so that a match
  ends where its line ends, as Python's regex was, RE2 took 8 % longer than a ``find`` of the
  newline per hit.)
- ``literal``: a literal every match contains (``error`` in ``^.*error:``, one per branch of an
  alternation), searched over an ASCII block (by ``bytes.find``, or RE2 for several: Python's
  regex took 4 to 5 times longer over an alternation of literals, 12 ignoring case); each line
  it hits goes to the filter.
- ``lines``: no such literal (``^\\s*$``), a pattern that matches an empty text (``x*``,
  ``\\B``: a line without a tab has its empty text nowhere in the block for a search to find),
  or a pattern whose structure this module cannot read (below): every line goes to the filter,
  still read in blocks.

The structure (anchors, required literals) is read with Python's regex parser, which only parses
here (nothing is matched with it), and only for patterns in a subset both engines read alike
(``_same_reading``: plain characters, the common escapes and classes, groups, ``i``/``m``/``s``
flags, counted repeats); any other pattern is searched line by line.

A block is searched as UTF-8 bytes, as RE2 reads text, when it is valid UTF-8 (the filter
decodes a line and RE2 encodes it again: the same bytes); a block that is not is decoded with
replacement characters and each line goes to the filter. Ignoring case over an ASCII block, a
literal that starts with a letter is found in the block lowercased (``bytes.lower`` and a plain
search), each hit then checked; a pattern that starts with characters without case has them
searched as they are and only the rest ignoring case (RE2 then scans for the first of them at
memory speed, as it cannot for a case-folded prefix: 29 ms against 44 ms for 36 MB). Where a line
in three matched the block before (``dense``), every line is tested instead.

A block is whole lines (``core.rungrep.blocks``), ``<ts>\\t<text>`` each, the filter applied to
the text; a line without a tab is all time stamp, its text empty.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import warnings
from collections.abc import Callable, Iterable, Iterator

from sparktui.core.linear import Regex, escape
from sparktui.core.linefilter import LineFilter

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

@contextlib.contextmanager
def quiet_regex() -> Iterator[None]:
    """Python's regex parser warns (``FutureWarning``) where a later Python may read a pattern
    otherwise: a warning printed over the console or into a grep's output is nothing an
    operator can act on (and such a pattern is not read with it: ``_same_reading``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


# -- the subset both engines read alike -----------------------------------------------------
_ESCAPES = frozenset("dDwWsSbBAtnrfv")  # letter escapes of the same meaning in both
_CLASS_ESCAPES = frozenset("dDwWsStnrfv")  # in a class (``\b`` is a backspace in Python's)
_META = frozenset("\\.^$|?*+()[]{}")
_FLAGS = re.compile(r"\(\?[ims]*(?:-[ims]+)?[:)]|\(\?P<[A-Za-z_][A-Za-z0-9_]*>|\(\?:")
_COUNT = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")


def _same_reading(pattern: str) -> tuple[bool, int]:
    """Whether ``pattern`` lies in the subset Python's parser reads as RE2 does, and how many of
    its first characters are plain characters without case that no repeat applies to (0 when
    the pattern has an alternation outside any group: they would belong to its first branch)."""
    i, size, depth, top_bar = 0, len(pattern), 0, False
    while i < size:
        ch = pattern[i]
        if ch == "\\":
            nxt = pattern[i + 1:i + 2]
            if not nxt or (nxt.isalnum() and nxt not in _ESCAPES) or not nxt.isascii():
                return False, 0
            i += 2
        elif ch == "[":
            i = _class_end(pattern, i + 1)
            if i < 0:
                return False, 0
        elif ch == "(":
            m = _FLAGS.match(pattern, i) if pattern.startswith("(?", i) else None
            if m is None and pattern.startswith("(?", i):
                return False, 0
            i = m.end() if m is not None else i + 1
            depth += 1
        elif ch == "{":
            m = _COUNT.match(pattern, i)
            if m is None:
                return False, 0
            i = m.end()
        else:
            depth -= ch == ")"
            top_bar = top_bar or (ch == "|" and depth == 0)
            i += 1
    lead = 0
    while lead < size and pattern[lead] not in _META and pattern[lead].isascii() \
            and pattern[lead].lower() == pattern[lead].upper():
        lead += 1
    if lead < size and pattern[lead] in "*+?{":
        lead -= 1  # the repeat is the last one's
    return True, 0 if top_bar else lead


def _class_end(pattern: str, i: int) -> int:
    """Where the class whose ``[`` is before ``i`` ends (past its ``]``); -1 outside the subset
    (a nested ``[``: POSIX classes in RE2, a future set syntax in Python)."""
    size = len(pattern)
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < size:
        ch = pattern[i]
        if ch == "]":
            return i + 1
        if ch == "[" or pattern.startswith(("&&", "||", "--", "~~"), i):
            return -1
        if ch == "\\":
            nxt = pattern[i + 1:i + 2]
            if not nxt or (nxt.isalnum() and nxt not in _CLASS_ESCAPES) or not nxt.isascii():
                return -1
            i += 2
        else:
            i += 1
    return -1


# -- what the pattern allows ------------------------------------------------------------------
_BOUNDARIES = {_sre.AT_BOUNDARY, _sre.AT_NON_BOUNDARY}
_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT}


def _anchored(data: Iterable[tuple[Any, Any]]) -> bool | None:
    r"""Whether the parsed pattern holds an anchor (None: a construct this walk does not know:
    trust nothing). ``\b`` and ``\B`` are no anchors here: a line's text sits between a tab and
    a newline in the block, neither a word character, just as nothing is before and after a
    string."""
    found: bool | None = False
    for op, av in data:
        if op is _sre.AT:
            if av not in _BOUNDARIES:
                return True
            continue
        if op in (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN):
            continue
        if op in _REPEATS:
            sub = _anchored(av[2])
        elif op is _sre.SUBPATTERN:
            sub = _anchored(av[3])
        elif op is _sre.BRANCH:
            subs = [_anchored(branch) for branch in av[1]]
            sub = True if True in subs else None if None in subs else False
        else:
            return None
        if sub is None:
            found = None
        elif sub:
            return True
    return found


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
        elif op is _sre.BRANCH:
            branches = [_required(sub) for sub in av[1]]
            if all(branches):
                consider(sorted({lit for branch in branches if branch for lit in branch}))
        elif op in _REPEATS and av[0] >= 1:
            consider(_required(av[2]))
    consider(["".join(run)] if run else None)
    return best


def _plain(data: Any) -> str | None:
    """The text of a pattern that is only plain characters, else None."""
    if not data or any(op is not _sre.LITERAL for op, _av in data):
        return None
    return "".join(chr(av) for _op, av in data)


def _bytes_find(needle: bytes) -> Callable[[Any, int, int], tuple[int, int]]:
    size = len(needle)

    def find(hay: Any, pos: int, hi: int) -> tuple[int, int]:
        at = hay.find(needle, pos, hi)
        return (at, at + size) if at >= 0 else (-1, -1)
    return find


class _Way:
    """How to search one kind of block (ASCII, UTF-8 or decoded). The classes here are plain,
    not NamedTuples: ``typing`` is not imported on the path of ``sparktui logs``."""

    __slots__ = ("check", "exact", "find", "lower", "regex")

    def __init__(self, find: Callable[[Any, int, int], tuple[int, int]] | Regex | None, exact: bool,
                 lower: bool, check: Callable[[Any], bool]) -> None:
        self.regex = find if isinstance(find, Regex) else None  # RE2's, called directly
        # None: every line goes to the check
        self.find: Callable[[Any, int, int], tuple[int, int]] | None = \
            find.find if isinstance(find, Regex) else find
        self.exact = exact  # a hit in a line's text is a match (the finder is the filter's regex)
        self.lower = lower  # search the block lowercased (the finder is a lowercase literal)
        self.check = check  # the filter's regex on one line's text: matched or not


class BlockSearch:
    """Where in a block of lines to look for the lines ``line_filter`` keeps (see the module)."""

    __slots__ = ("ascii", "line_filter", "mode", "text", "utf8")

    def __init__(self, line_filter: LineFilter, mode: Mode, text: _Way | None = None,
                 ascii: _Way | None = None, utf8: _Way | None = None) -> None:
        self.line_filter = line_filter
        self.mode = mode
        self.text = text  # over a decoded block (not valid UTF-8): every line checked
        self.ascii = ascii  # over an ASCII block as bytes
        self.utf8 = utf8  # over a block of valid UTF-8 as bytes

    @classmethod
    def of(cls, line_filter: LineFilter) -> BlockSearch:
        with quiet_regex():
            return cls._of(line_filter)

    @classmethod
    def _of(cls, line_filter: LineFilter) -> BlockSearch:
        regex = line_filter.regex
        if regex is None or line_filter.error is not None:
            return cls(line_filter, "all")
        check_b = regex.search_bytes
        every = _Way(None, False, False, regex.search)
        each = _Way(None, False, False, check_b)
        if regex.search(""):  # it matches an empty text (x*, \B): a line without a tab has its
            return cls(line_filter, "lines", every, each, each)  # text nowhere in the block
        same, lead = _same_reading(regex.pattern)
        try:
            parsed = _sre_parse.parse(regex.pattern, re.IGNORECASE if regex.ignore_case else 0) \
                if same else None
        except Exception:  # Python reads it otherwise (or not at all): check every line
            parsed = None
        anchored = None if parsed is None else _anchored(parsed.data)
        if parsed is None or anchored is None:
            return cls(line_filter, "lines", every, each, each)
        flags = int(parsed.state.flags)
        literals = _required(list(parsed.data))
        mode: Mode = "full" if not anchored else "literal" if literals else "lines"
        ignore = bool(flags & re.IGNORECASE)
        utf8 = each
        if mode == "full":
            pattern = regex.pattern
            if regex.ignore_case and lead and not pattern.startswith("(?"):
                # the characters without case searched as they are: a prefix RE2 scans for fast
                pattern = pattern[:lead] + ("(?i:" + pattern[lead:] + ")" if pattern[lead:] else "")
                finder = Regex(pattern)
            else:
                finder = Regex(pattern, regex.ignore_case)
            utf8 = _Way(finder, True, False, check_b)
        plain = _plain(parsed.data)
        if plain is not None and plain.isascii() and "\n" not in plain:  # never_nl: no match
            # a literal: searched and checked by ``bytes.find`` and ``in`` over an ASCII block
            # (lowercased when ignoring case), not a call into RE2 per hit and per line
            needle = (plain.lower() if ignore else plain).encode()
            lower = ignore and needle != needle.upper()
            check_lit: Callable[[Any], bool] = (
                (lambda text: needle in text.lower()) if lower else (lambda text: needle in text))
            return cls(line_filter, mode, every, _Way(_bytes_find(needle), True, lower, check_lit), utf8)
        if literals and ignore and not all(lit.isascii() for lit in literals):
            literals = None  # RE2 folds the Kelvin sign to k: no ASCII literal to look for
        folds = ignore and literals is not None and any(ch.isalpha() for lit in literals for ch in lit)
        if folds and literals and not (mode == "full" and lead):
            lowered = Regex("|".join(escape(lit.lower()) for lit in literals))
            ascii_way = _Way(lowered, False, True, check_b)
        elif mode == "full":
            ascii_way = utf8
        elif mode == "literal" and literals:
            ascii_way = _Way(Regex("|".join(map(escape, literals)), ignore), False, False, check_b)
        else:
            ascii_way = each
        return cls(line_filter, mode, every, ascii_way, utf8)

    # -- one block ------------------------------------------------------------------------------
    def kept(self, data: bytes, lo: int = 0, hi: int | None = None, *, dense: bool = False) -> Kept:
        """The lines of ``data[lo:hi]`` (whole lines) the filter keeps, in order, with the
        buffer their spans index: ``data`` itself when it is valid UTF-8, else the region
        decoded. ``dense``: most lines match (the last block said so), so test each line
        instead of expanding a hit per line."""
        hi = len(data) if hi is None else hi
        way: _Way | None = self.ascii
        valid = data.isascii()
        if not valid:
            way = self.utf8
            try:
                data[lo:hi].decode("utf-8")
                valid = True
            except UnicodeDecodeError:
                pass
        if self.mode == "all":
            if valid:
                return Kept(data, lo, hi, _every_line(data, lo, hi), hi - lo)
            text = data[lo:hi].decode("utf-8", "replace")
            return Kept(text, 0, len(text), _every_line(text, 0, len(text)), len(text))
        if valid and way is not None:
            return self._kept(way, data, lo, hi, dense)
        assert self.text is not None
        text = data[lo:hi].decode("utf-8", "replace")
        return self._kept(self.text, text, 0, len(text), dense)

    def _kept(self, way: _Way, buf: AnyStr, lo: int, hi: int, dense: bool) -> Kept:
        invert = self.line_filter.invert
        if way.find is None or dense:
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


def _search(buf: AnyStr, hay: AnyStr, lo: int, hi: int, way: _Way) -> list[Span]:
    """Hits of ``way.find`` in ``hay`` (``buf`` or ``buf`` lowercased: the same positions),
    each expanded to its line in ``buf`` and kept when it is a match of the line's text
    (``exact``) or ``way.check`` says so."""
    nl: Any = b"\n" if isinstance(buf, bytes) else "\n"
    tab: Any = b"\t" if isinstance(buf, bytes) else "\t"
    search = way.find
    assert search is not None
    match, anchor = way.regex.raw() if way.regex is not None else (None, None)
    find, rfind, check, exact = buf.find, buf.rfind, way.check, way.exact
    past = hi if buf[hi - 1:hi] == nl else hi + 1  # a hit here is after the last line
    out: list[Span] = []
    pos = lo
    while pos < hi:
        hit, end = match(anchor, hay, pos, hi)[0] if match is not None else search(hay, pos, hi)
        if hit < 0 or hit >= past:
            break
        start = rfind(nl, lo, hit) + 1 or lo
        end = find(nl, hit, hi)
        if end < 0:
            end = hi
        t = find(tab, start, end)
        if exact and 0 <= t < end - 1:
            # in the text: a match; in the time stamp: search the text alone (before its start
            # a tab, after its end a newline, which nothing here can see). An empty text goes
            # to the check: \B never matches in an empty string
            if t < hit or search(hay, t + 1, end)[0] >= 0:
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
