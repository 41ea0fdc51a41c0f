"""The operator's regexes run in linear time (``core.linear``, RE2): a pattern that backtracks
forever in Python's ``re`` (``(a+)+$`` over a line of ``a`` and a ``!``: 2.95 s at 24 ``a``, four
times more for each two more) answers at once on every path that runs one (the boot checks, the
grep's filter, the block search), and what RE2 cannot run is refused with a sentence naming it.

The slow cases run in a child process with a timeout, so that on code that backtracks the test
fails cleanly instead of hanging the suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.core.blockgrep import BlockSearch
from sparktui.core.checks import BootChecks
from sparktui.core.errors import SparkError
from sparktui.core.linear import PatternError, Regex
from sparktui.core.linefilter import LineFilter
from sparktui.core.patterns import compile_pattern
from tests.cli.test_validate import line_of, run
from tests.conftest import ROOT

EVIL = "(a+)+$"
LINE = "a" * 32 + "!"  # about 190 s a search in Python's re (2.95 s at 24, x4 per two more)


def in_child(code: str, budget: float = 1.0) -> None:
    """``code`` (which sets ``took``, seconds) run in a fresh interpreter: it must end, and
    ``took`` be under ``budget``."""
    program = textwrap.dedent(code) + f"\nassert took < {budget}, took\nprint('ok', took)\n"
    try:
        done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                              text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the pattern was still being searched after 30 s")
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr


def test_a_must_not_show_check_over_a_line_of_a_ends_at_once() -> None:
    in_child(f"""
        import time
        from sparktui.core.checks import BootChecks
        from sparktui.core.plan import BootPlan
        checks = BootChecks(1)
        checks.add("must_not_show", "re:{EVIL}", "all")
        checks.add("must_show", "re:{EVIL}", "all")
        t = time.perf_counter()
        one = checks.feed(0, [(1, {LINE!r})])  # one line: searched alone
        many = checks.feed(0, [(n, {LINE!r}) for n in range(2, 200)])  # a batch: joined first
        took = time.perf_counter() - t
        assert one == [] and many == [], (one, many)
    """)


def test_the_grep_filter_over_a_line_of_a_ends_at_once() -> None:
    in_child(f"""
        import time
        from sparktui.core.linefilter import LineFilter
        f, inv = LineFilter.parse({EVIL!r}), LineFilter.parse("!" + {EVIL!r})
        t = time.perf_counter()
        kept = [f.matches({LINE!r}) for _ in range(1000)]
        shown = [inv.matches({LINE!r}) for _ in range(1000)]
        spans = f.spans({LINE!r})
        took = time.perf_counter() - t
        assert not any(kept) and all(shown) and spans == []
    """)


def test_the_block_search_over_lines_of_a_ends_at_once() -> None:
    in_child(f"""
        import time
        from sparktui.core.blockgrep import BlockSearch
        from sparktui.core.linefilter import LineFilter
        block = ("2026-01-01T00:00:01Z\\t" + {LINE!r} + "\\n").encode() * 2000
        t = time.perf_counter()
        for pattern in ({EVIL!r}, "!" + {EVIL!r}, "^" + {EVIL!r}):
            kept = BlockSearch.of(LineFilter.parse(pattern)).kept(block)
            assert len(kept.spans) == (2000 if pattern.startswith("!") else 0), pattern
        took = time.perf_counter() - t
    """)


def test_the_pattern_still_matches_where_it_should() -> None:
    """Linear, and the same answers: ``(a+)+$`` matches a line that ends in ``a``."""
    checks = BootChecks(1)
    check = checks.add("must_not_show", f"re:{EVIL}", "all")
    assert [u.state for u in checks.feed(0, [(1, LINE), (2, "xx aaa")])] == ["failed"]
    assert checks.status[(check.id, 0)].match is not None
    assert checks.status[(check.id, 0)].match.line_no == 2
    assert LineFilter.parse(EVIL).spans("b aaa") == [(2, 5)]
    block = b"t\t" + LINE.encode() + b"\nt\tb aaa\n"
    assert [block[s:e] for s, _t, e in BlockSearch.of(LineFilter.parse(EVIL)).kept(block).spans] == [b"t\tb aaa"]


@pytest.mark.parametrize(("pattern", "sentence"), [
    (r"(a)\1", r"backreferences (\1) are not supported: patterns run in a linear-time engine"),
    ("(?P<x>a)(?P=x)", "named backreferences ((?P=name)) are not supported: patterns run in a linear-time engine"),
    ("x(?=y)", "lookahead ((?=...)) is not supported: patterns run in a linear-time engine"),
    ("x(?!y)", "negative lookahead ((?!...)) is not supported: patterns run in a linear-time engine"),
    ("(?<=y)x", "lookbehind ((?<=...)) is not supported: patterns run in a linear-time engine"),
    ("(?<!y)x", "negative lookbehind ((?<!...)) is not supported: patterns run in a linear-time engine"),
    ("(?>a+)", "atomic groups ((?>...)) are not supported: patterns run in a linear-time engine (nothing backtracks)"),
    ("a++", "possessive quantifiers (*+, ++, ?+) are not supported: patterns run in a linear-time engine (nothing backtracks)"),
    (r"end\Z", r"\Z is not supported: write $ (or \z) for the end of the line"),
    (r"caf\u00e9", r"\u is not supported: write \x{00e9} for a character by its code"),
    ("(?a)x", r"the (?a) flag is not supported: \d, \w, \s and \b are always ASCII here"),
    ("a{1001}", "invalid repetition {1001}: counts go from the lower to the higher, up to 1000"),
    ("a(", "missing ), unterminated subpattern at position 1"),
])
def test_what_the_engine_cannot_run_is_named(pattern: str, sentence: str,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(PatternError) as info:
        Regex(pattern)
    assert str(info.value) == sentence
    assert LineFilter.parse(pattern).error == f"bad regex: {sentence}"
    with pytest.raises(ValueError, match=r"^bad regular expression"):
        compile_pattern("re:" + pattern)
    assert capfd.readouterr() == ("", "")  # RE2 logs its errors to stderr unless told not to


def test_the_command_lines_grep_names_a_backreference() -> None:
    with pytest.raises(SparkError) as info:
        LineFilter.require(r"!(\w+) \1")
    assert str(info.value) == (r"grep pattern '!(\\w+) \\1': bad regex: backreferences (\1) are "
                               "not supported: patterns run in a linear-time engine")


def test_a_recipe_check_with_a_lookahead_is_refused_with_its_line(
        capsys: pytest.CaptureFixture[str], write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('    "MISMATCH",', '    "re:MISMATCH(?! 0)",'))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    line = line_of(path, "re:MISMATCH(?! 0)")
    assert f"recipe.toml:{line}:" in text
    assert ("bad regular expression 'MISMATCH(?! 0)': negative lookahead ((?!...)) is not supported: "
            "patterns run in a linear-time engine") in text


def test_re2s_own_syntax_and_character_rules() -> None:
    """What RE2 reads that Python's ``re`` did not, and its ASCII classes (docs/recipes.md)."""
    assert Regex(r"^\pL+ \d+\z").search("Ünïcode 42")
    assert Regex("[[:digit:]]{3}").search("port 300")
    assert Regex("(?P<rank>[0-9]+)").search("rank 3")
    assert not Regex(r"\d").search("٣")  # an Arabic-Indic three: \d is ASCII digits
    assert not Regex(r"\w").search("é") and Regex(r"\pL").search("é")
    assert Regex("k", ignore_case=True).search("\u212a")  # case folds the Unicode way
    assert not Regex(r"a\sb").search("a\x1cb")  # \s is [\t\n\f\r ]
