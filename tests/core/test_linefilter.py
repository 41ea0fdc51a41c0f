"""The one grep (console and ``sparktui logs --grep``): smart case, ``!`` inverts, spans."""

from __future__ import annotations

import pytest

from sparktui.core.errors import SparkError
from sparktui.core.linefilter import NO_FILTER, LineFilter


def test_smart_case_a_pattern_without_capitals_ignores_case() -> None:
    f = LineFilter.parse("nccl|error")
    assert f.active and not f.invert
    assert f.matches("NCCL WARN x") and f.matches("Error: boom") and not f.matches("all good")


def test_smart_case_one_capital_makes_it_case_sensitive() -> None:
    f = LineFilter.parse("NCCL")
    assert f.matches("NCCL WARN") and not f.matches("nccl warn")
    assert not LineFilter.parse("Error").matches("error")
    # the rule looks at every character typed: the S of \S is a capital too
    assert not LineFilter.parse(r"a\S").matches("A!")


def test_a_leading_bang_inverts() -> None:
    inv = LineFilter.parse("!tick")
    assert inv.invert and inv.active and not inv.highlights
    assert inv.matches("ready") and not inv.matches("demo tick 3") and not inv.matches("TICK")
    assert LineFilter.parse("!DEMO").matches("demo tick 3")  # capitals: case-sensitive, inverted
    assert not LineFilter.parse("!DEMO").matches("DEMO rendezvous ok")
    assert LineFilter.parse(r"\!x").matches("!x")  # an escaped bang is a literal one


def test_empty_patterns_filter_nothing() -> None:
    for text in ("", "!"):
        f = LineFilter.parse(text)
        assert not f.active and f.error is None and f.matches("anything") and f.spans("x") == []
    assert LineFilter.parse("!").invert
    assert not NO_FILTER.active and NO_FILTER.matches("x")


def test_bad_regex_is_kept_while_typing_and_shows_every_line() -> None:
    bad = LineFilter.parse("foo(")
    assert bad.error is not None and bad.error.startswith("bad regex: ") and "missing )" in bad.error
    assert not bad.active and bad.matches("x") and bad.spans("foo(") == []
    assert LineFilter.parse("!foo(").error is not None


def test_require_raises_a_sentence_naming_the_pattern_and_the_regex_error() -> None:
    with pytest.raises(SparkError) as info:
        LineFilter.require("foo(")
    assert str(info.value) == ("grep pattern 'foo(': bad regex: missing ), unterminated subpattern "
                               "at position 3")
    with pytest.raises(SparkError, match=r"grep pattern '!\[': bad regex: unterminated character set at position 1$"):
        LineFilter.require("![")


def test_require_refuses_nothing_after_the_bang() -> None:
    with pytest.raises(SparkError, match=r"grep pattern '!': nothing after '!'"):
        LineFilter.require("!")


def test_require_keeps_what_parse_keeps() -> None:
    assert LineFilter.require("nccl") == LineFilter.parse("nccl")
    assert LineFilter.require("!Tick") == LineFilter.parse("!Tick")
    assert not LineFilter.require("").active  # no pattern: every line


def test_spans_are_where_the_pattern_matches() -> None:
    f = LineFilter.parse("nccl|error")
    assert f.spans("an error and NCCL") == [(3, 8), (13, 17)]
    assert f.spans("nothing here") == []
    assert LineFilter.parse("x*").spans("abxxc") == [(2, 4)]  # empty matches are left out
    assert LineFilter.parse("!error").spans("an error") == []  # inverted: nothing to highlight


def test_patterns_a_later_python_may_read_otherwise_say_nothing_on_stderr() -> None:
    """``[[``, ``&&`` and ``||`` in a class make Python's regex parser warn (FutureWarning): printed
    over the console or into ``sparktui logs``' output, and nothing an operator can act on.
    The pattern is taken as this Python reads it, quietly, by the filter and the block search."""
    import warnings

    from sparktui.core.blockgrep import BlockSearch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for pattern in ("[[x]", "[a&&b]", "!x[[y]", "[a||b]"):
            f = LineFilter.parse(pattern)
            assert f.active
            BlockSearch.of(f).kept(b"t\tx[y\nt\tz\n")
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("pattern", ["tick", "Tick", "!tick", "a b", "#running-req: 6", "k"])
def test_a_plain_pattern_matches_as_its_regex_does(pattern: str) -> None:
    """Plain text is looked for with ``in`` in an ASCII line, RE2 elsewhere: the same answers."""
    f = LineFilter.parse(pattern)
    assert f.regex is not None
    for text in ("demo tick 3", "DEMO TICK", "Tick", "a b c", "ab", "x #running-req: 61,", "",
                 "\u212a", "K", "tick \u212a", "\u017f"):
        assert f.matches(text) == (f.regex.search(text) != f.invert), (pattern, text)
