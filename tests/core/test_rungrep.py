"""The block grep (``core.blockgrep``, ``core.rungrep``) keeps exactly the lines ``LineFilter``
keeps, line by line, as ``RankLog.read`` reads them: for random patterns and random files, smart
case and ``!`` included, at every block size (lines cut by a read, lines longer than a block),
with ``\\r\\n``, lone ``\\r``, no newline at the end, invalid UTF-8, lines without a tab and text
that folds case the Unicode way (the Kelvin sign is a ``k``, the long s an ``s``)."""

from __future__ import annotations

import heapq
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sparktui.core.blockgrep import BlockSearch
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import RunScan, blocks, merge_found, norm_ts, norm_ts_bytes, rank_found, tail
from sparktui.core.runstore import RankLog

# random patterns hold "[[": the regex compiler's note about a future syntax is no failure
pytestmark = pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")

# characters that matter: regex syntax, case (ASCII and Unicode folds), Unicode spaces, tabs
ALPHABET = "abcKkSs#:,. -_0169\t[]()|*+?^$\\éÉ\u212a\u017f\u0131\u0130\x1c\u2028✓"
PIECES = ["a", "b", "k", "K", "s", "S", "#", ":", ",", " ", "-", "0", "1", "9", "é", "\u212a",
          "\u017f", ".", r"\d", r"\s", r"\S", r"\w", r"\W", r"\b", r"\B", "^", "$", r"\A", r"\Z",
          "[a-c]", "[^a]", "[^\\n]", r"[\s\S]", "[K-k]", "(?i)", "(?s)", "(?m)", "(?-i:a)", "(?i:k)",
          # RE2's own syntax (Python reads these otherwise, or not at all): the block search
          # must not trust Python's reading of them
          r"\pL", "[[:alpha:]]", r"\x{212a}", "(?U)", "(?P<n>a)", r"\z", r"\Q.\E", "a{,2}", r"\C",
          # refused (backreferences, lookaround): the filter shows every line, as the search must
          "(a)\\1", "(?=a)", "(?<!#)",
          "(a|b)", "(?:#|:)", "a*", "b+", "k?", "s{2}", ".*", ".+?", r"\t", r"\n", "x*", "|", "(",
          ")", "[", "*"]
STAMPS = ["2026-01-01T00:00:01.123456789Z", "2026-01-01T00:00:01.5Z", "2026-01-01T00:00:02Z",
          "2026-01-01T00:00:01.123456Z", "", "garbage"]


@st.composite
def patterns(draw: st.DrawFn) -> str:
    body = "".join(draw(st.lists(st.sampled_from(PIECES), min_size=0, max_size=5)))
    if draw(st.booleans()):
        body = draw(st.text(ALPHABET, max_size=6))
    return ("!" if draw(st.integers(0, 3)) == 0 else "") + body


@st.composite
def files(draw: st.DrawFn) -> bytes:
    """A rank's file as anything might have left it."""
    out = b""
    for _ in range(draw(st.integers(0, 12))):
        text = draw(st.text(ALPHABET, max_size=30)).encode()
        if draw(st.integers(0, 9)) == 0:
            text += draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x84", b"\x80abc"]))
        form = draw(st.integers(0, 9))
        stamp = draw(st.sampled_from(STAMPS)).encode()
        line = stamp + b"\t" + text if form else text  # 1 in 10 has no tab
        out += line + draw(st.sampled_from([b"\n"] * 6 + [b"\r\n", b"\r"]))
    if out and draw(st.booleans()):
        out = out.rstrip(b"\r\n")  # no newline at the end
    return out


def reference(path: Path, line_filter: LineFilter) -> list[tuple[int, str, str]]:
    """What the console's grep keeps, one line at a time."""
    return [(no, norm_ts(ts), text) for no, ts, text in RankLog(path).read() if line_filter.matches(text)]


def write(tmp_path: Path, data: bytes, name: str = "r0.log") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns(), data=files(), size=st.sampled_from([1, 7, 32, 4096]))
@example(pattern="#running-req: 6[0-4],", size=32,
         data=b"2026-01-01T00:00:01Z\tDecode batch. #running-req: 61, #token: 9\n"
              b"2026-01-01T00:00:02Z\tDecode batch. #RUNNING-REQ: 60, #token: 9\r\n"
              b"2026-01-01T00:00:03Z\tDecode batch. #running-req: 70, #token: 9")
@example(pattern="k", size=4096, data="2026-01-01T00:00:01Z\t\u212a\n".encode())  # the Kelvin sign
@example(pattern="!s", size=4096, data="x\t\u017f\nx\tS\nx\tz\n".encode())  # the long s
@example(pattern=r"a\sb", size=4096, data=b"x\ta\x1cb\nx\ta b\nx\tab\n")  # a Unicode space
@example(pattern="^b", size=7, data=b"2026\tab\n2026\tba\nb\n")  # ^ is the text's start, not the line's
@example(pattern="01", size=4096, data=b"2026-01-01T00:00:01Z\tx\n")  # hits in the stamp only
@example(pattern="!\\B", size=1, data=b"0\n")  # \B matches the empty text of a line without a tab
@example(pattern="x*", size=1, data=b"\n\n\tx\n")
@example(pattern="x*", size=4096, data=b"a\tb")  # an empty match past the last line's end
# literals of an alternation found in the block: lowercased (smart case), and as they are
@example(pattern="^.*(error|warn)", size=4096,
         data=b"t\tWARN: x\nt\terr\nerror\tno text\nt\ta ERROR\nt\twarn\n")
@example(pattern="^[^#]*(ERROR|Warn)", size=7,
         data=b"t\tWarn\nt\t#ERROR\nt\terror\nt\tx ERROR y\nWarn\t\n")
def test_the_block_search_keeps_what_the_filter_keeps(tmp_path: Path, pattern: str, data: bytes,
                                                      size: int) -> None:
    line_filter = LineFilter.parse(pattern)
    path = write(tmp_path, data)
    search = BlockSearch.of(line_filter)
    want = reference(path, line_filter)
    got = RunScan({0: path}, search, cap=10**6, size=size).run()
    assert [(no, ts, text) for ts, _rank, no, text in got.lines] == want
    assert got.total == len(want) and got.scanned == {0: sum(1 for _ in RankLog(path).read())}
    found = [line for batch in rank_found(path, 0, search, size=size) for line in batch]
    assert [(key.decode(), text.decode()) for key, _rank, _place, text in found] == \
        [(ts, text) for _no, ts, text in want]
    assert [place for _key, _rank, place, _text in found] == sorted({p for _k, _r, p, _t in found})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns(), ranks=st.lists(files(), min_size=1, max_size=4), size=st.sampled_from([5, 4096]))
def test_ranks_merge_in_the_consoles_order(tmp_path: Path, pattern: str, ranks: list[bytes],
                                           size: int) -> None:
    """Only kept lines are merged, in the order the console's ``heapq.merge`` gives (stamps
    that go back included)."""
    line_filter = LineFilter.parse(pattern)
    paths = {rank: write(tmp_path, data, f"r{rank}.log") for rank, data in enumerate(ranks)}
    search = BlockSearch.of(line_filter)
    want = list(heapq.merge(*([(ts, rank, no, text) for no, ts, text in reference(path, line_filter)]
                              for rank, path in paths.items())))
    got = [line for batch in merge_found({rank: rank_found(path, rank, search, size=size)
                                          for rank, path in paths.items()}) for line in batch]
    assert [(rank, text.decode()) for _key, rank, _place, text in got] == \
        [(rank, text) for _ts, rank, _no, text in want]


def test_dense_and_sparse_blocks_switch_and_agree(tmp_path: Path) -> None:
    """A run whose matches come in floods and droughts: every block is searched one way or the
    other (per line where a line in three matched the block before) and nothing differs."""
    lines = []
    for i in range(3000):
        hit = (i // 500) % 2 == 0 or i % 97 == 0
        lines.append(f"2026-01-01T00:00:{i % 60:02d}.{i:06d}Z\t{'needle' if hit else 'hay'} {i}\n")
    path = write(tmp_path, "".join(lines).encode())
    for pattern in ("needle", "!needle", "NEEDLE", "ne+dle \\d+$"):
        line_filter = LineFilter.parse(pattern)
        got = RunScan({0: path}, BlockSearch.of(line_filter), cap=10**6, size=2048).run()
        assert [(no, text) for _ts, _r, no, text in got.lines] == \
            [(no, text) for no, _ts, text in reference(path, line_filter)]


@pytest.mark.parametrize(("pattern", "mode", "as_bytes"), [
    ("#running-req: 6[0-4],", "full", True),
    ("error", "full", True),  # ignoring case: a lowercase literal over the block lowercased
    ("^Prefill", "literal", True),
    ("OK$", "literal", True),
    (r"^\s*$", "lines", True),  # every block as bytes: RE2 reads UTF-8
    ("café", "full", True),
    (r"a\nb", "full", True),  # never a newline in a match: no match spans lines
    (r"^\pL", "lines", True),  # RE2's syntax: Python's reading of its structure is not trusted
    ("[[:alpha:]]$", "lines", True),
    ("(", "all", False),  # a bad regex filters nothing
    ("(a)\\1", "all", False),  # nor one RE2 refuses
    ("", "all", False),
])
def test_the_search_each_pattern_gets(pattern: str, mode: str, as_bytes: bool) -> None:
    search = BlockSearch.of(LineFilter.parse(pattern))
    assert search.mode == mode
    assert (search.ascii is not None) == as_bytes


def test_ignoring_case_the_block_is_lowercased_only_for_a_literal_starting_with_a_letter() -> None:
    lowered = BlockSearch.of(LineFilter.parse("running-req: 6[0-4],"))
    assert lowered.ascii is not None and lowered.ascii.lower and not lowered.ascii.exact
    direct = BlockSearch.of(LineFilter.parse("#running-req: 6[0-4],"))  # "#" has no case
    assert direct.ascii is not None and not direct.ascii.lower and direct.ascii.exact


@pytest.mark.parametrize("pattern", ["#running-req: 6[0-4],", "a|b", "(?i)k", "running-req"])
def test_a_full_search_keeps_the_lines_it_hits(tmp_path: Path, pattern: str) -> None:
    search = BlockSearch.of(LineFilter.parse(pattern))
    assert search.mode == "full" and search.ascii is not None and search.ascii.find is not None
    data = b"T\tzz #running-req: 61, a b k tail\nT\tnone\nT\tb #running-req: 62, K\n"
    kept = search.kept(data)
    assert [data[start:end] for start, _t, end in kept.spans] == [
        line for line in data.splitlines() if LineFilter.parse(pattern).matches(line[2:].decode())]


def test_blocks_are_whole_lines_and_never_split_a_crlf(tmp_path: Path) -> None:
    data = b"a\r\nbb\rccc\n" + b"d" * 50 + b"\r\n\re"
    path = write(tmp_path, data)
    for size in (1, 2, 3, 5, 64):
        joined = b"".join(block[lo:hi] for _offset, block, lo, hi in blocks(path, size=size))
        assert joined == b"a\nbb\nccc\n" + b"d" * 50 + b"\n\ne"
        for _offset, block, lo, hi in blocks(path, size=size):
            assert block[lo:hi].endswith(b"\n") or block[lo:hi].endswith(b"e")
    assert list(blocks(tmp_path / "missing.log")) == []


@given(data=files(), window=st.integers(1, 20), size=st.sampled_from([1, 16, 4096]))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_tail_is_the_newest_lines_with_their_numbers(tmp_path: Path, data: bytes, window: int,
                                                     size: int) -> None:
    path = write(tmp_path, data)
    want = [(norm_ts(ts), 0, no, text) for no, ts, text in RankLog(path).read()][-window:]
    assert tail(path, 0, window, size=size) == want


@given(st.sampled_from([*STAMPS, "2026-01-01T00:00:01.1234567891Z", "2026-01-01T00:00:01.5"]))
def test_stamps_as_bytes_normalise_as_text_does(stamp: str) -> None:
    assert norm_ts_bytes(stamp.encode()) == norm_ts(stamp).encode()


def test_a_scan_stops_when_cancelled(tmp_path: Path) -> None:
    path = write(tmp_path, b"2026-01-01T00:00:01Z\tx\n" * 1000)
    scan = RunScan({0: path, 1: path}, BlockSearch.of(LineFilter.parse("x")), cap=10, size=64)
    scan.cancel()
    result = scan.run()
    assert result.total == 0 and result.lines == [] and scan.fraction == 0.0


def test_invalid_regexes_never_reach_the_search() -> None:
    for bad in ("(", "[", "a{2,1}", "(?P<", "*"):
        with pytest.raises(re.error):
            re.compile(bad)
        assert BlockSearch.of(LineFilter.parse(bad)).mode == "all"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns(), data=files(), size=st.sampled_from([1, 7, 64, 4096]),
       cap=st.sampled_from([0, 1, 2, 5, 40]))
@example(pattern="x", size=7, cap=2, data=b"t\tx\nt\ty\nt\tx\nt\tx\nt\ty\nt\tx\n")
def test_a_scan_keeps_the_newest_kept_lines_with_their_numbers(
        tmp_path: Path, pattern: str, data: bytes, size: int, cap: int) -> None:
    """The console keeps only the newest ``cap`` matches of a rank's file: the same lines, with
    the same numbers, as the filter line by line, and every match counted."""
    line_filter = LineFilter.parse(pattern)
    path = write(tmp_path, data)
    want = reference(path, line_filter)
    got = RunScan({0: path}, BlockSearch.of(line_filter), cap=cap, size=size).run()
    assert [(no, ts, text) for ts, _rank, no, text in got.lines] == (want[-cap:] if cap else [])
    assert got.total == len(want) and got.scanned == {0: sum(1 for _ in RankLog(path).read())}


def test_a_file_that_grows_during_a_scan_is_read_as_it_was_when_the_scan_began(tmp_path: Path) -> None:
    """The count comes from a first pass and the numbers from a second read of the same bytes:
    lines written in between (a live run, here a cut line completed) are not half counted; the
    console takes them from its window (``scanned`` says where the scan stopped)."""
    head = b"".join(b"2026-01-01T00:00:%02dZ\tx %d\n" % (i % 60, i) for i in range(300))
    path = write(tmp_path, head + b"2026-01-01T00:01:00Z\tx cut")
    line_filter = LineFilter.parse("x")
    want = reference(path, line_filter)

    def grow(scan: RunScan) -> None:
        if scan.counted:
            with path.open("ab") as f:
                f.write(b" short\n" + b"2026-01-01T00:01:01Z\tx later\n" * 50)

    got = RunScan({0: path}, BlockSearch.of(line_filter), cap=20, size=256, on_block=grow).run()
    assert [(no, ts, text) for ts, _rank, no, text in got.lines] == want[-20:]
    assert got.total == len(want) == 301 and got.scanned == {0: 301}
