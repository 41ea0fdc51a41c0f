"""``sparktui logs`` writes its lines where they are searched (``rungrep.rank_lines``: records
that sort as bytes) and merges them in C (``merge_lines``): the bytes written are exactly what
merging the kept lines as tuples (``merge_found``) and writing each one gave, for every rank
count, block size and batch size, with ``--timestamps``, ``--raw`` and ``--since``: equal time
stamps across ranks and within one, stamps of other lengths and lines without a tab (``Line``
batches), a clock that steps back, control characters and invalid UTF-8; and in the order of
the console's ``heapq.merge``; from the workers as from one process."""

from __future__ import annotations

import heapq
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.backend.grepwork import searching
from sparktui.core.blockgrep import BlockSearch
from sparktui.core.controls import visible, visible_bytes
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import Form, Found, merge_found, merge_lines, norm_ts, rank_found, rank_lines
from sparktui.core.runstore import RankLog

pytestmark = pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")

FORMS = [Form(), Form(timestamps=True), Form(raw=True), Form(timestamps=True, raw=True)]
CUTOFFS = [None, b"2026-01-01T00:00:03", b"2026-01-01T00:00:03.500000000Z",
           b"2026-01-01T00:00:03.500000000Z+later"]  # shorter, as long as, longer than a stamp


def old_written(paths: dict[int, Path], search: BlockSearch, form: Form, cutoff: bytes | None,
                size: int) -> bytes:
    """What ``sparktui logs`` wrote before its lines were written by the searches: every
    rank's ``Found`` merged by ``merge_found``, then each written (``cli.logs.write_found`` as
    it was)."""
    out = b""
    for batch in merge_found({rank: rank_found(path, rank, search, size=size)
                              for rank, path in paths.items()}):
        kept: list[Found] = [f for f in batch if cutoff is None or f[0] >= cutoff]
        if form.timestamps:
            lines = [b"r%d " % rank + key[11:23] + b" " + text for key, rank, _p, text in kept]
        else:
            lines = [b"r%d " % rank + text for _key, rank, _p, text in kept]
        if lines:
            chunk = b"\n".join([*lines, b""])
            out += chunk if form.raw else visible_bytes(chunk)
    return out


def new_written(paths: dict[int, Path], search: BlockSearch, form: Form, cutoff: bytes | None,
                size: int) -> bytes:
    return b"".join(merge_lines({rank: rank_lines(path, rank, search, form, size=size)
                                 for rank, path in paths.items()}, cutoff=cutoff))


def console_order(paths: dict[int, Path], line_filter: LineFilter) -> list[tuple[int, str]]:
    """``(rank, text)`` of every kept line as the console merges them, line by line."""
    return [(rank, text) for _ts, rank, _no, text in heapq.merge(*(
        [(norm_ts(ts), rank, no, text) for no, ts, text in RankLog(path).read()
         if line_filter.matches(text)] for rank, path in paths.items()))]


def stamp(tenths: int, digits: int) -> bytes:
    """A time stamp ``tenths`` tenths of a second after midnight, with ``digits`` digits of
    fraction as a runtime writes them (docker trims trailing zeros; 0: none at all)."""
    whole, frac = divmod(tenths, 10)
    text = f"2026-01-01T00:00:{whole:02d}"
    if digits:
        text += "." + f"{frac}{'0' * 8}"[:digits]
    return (text + "Z").encode()


TEXTS = [b"Decode batch. #running-req: 61,", b"Prefill batch. #running-req: 7,", b"plain hay",
         b"bell \x07 and esc \x1b[2J", b"bidi \xe2\x80\xae txt", b"bad utf-8 \xff\xc3 x",
         b"tab\tin the text", b""]


@st.composite
def runs(draw: st.DrawFn) -> list[bytes]:
    """Ranks whose clocks mostly go forward in tenths of a second: equal stamps across ranks
    and within one, trimmed and short stamps, sometimes a line without a tab, a garbage stamp
    or a step back."""
    ranks = []
    for _ in range(draw(st.integers(1, 5))):
        t = draw(st.integers(0, 5))
        out = b""
        for _ in range(draw(st.integers(0, 40))):
            t += draw(st.sampled_from([0, 0, 1, 1, 1, 2, 3] + [-4] * (draw(st.integers(0, 1)))))
            t = max(t, 0)
            kind = draw(st.integers(0, 29))
            text = draw(st.sampled_from(TEXTS))
            if kind == 0:
                line = text  # no tab: all stamp
            elif kind == 1:
                line = b"garbage\t" + text
            else:
                line = stamp(t, draw(st.sampled_from([9, 9, 9, 6, 3, 1, 0]))) + b"\t" + text
            out += line + draw(st.sampled_from([b"\n"] * 8 + [b"\r\n"]))
        ranks.append(out)
    return ranks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ranks=runs(), pattern=st.sampled_from(["", "running", "!hay", "batch", "x"]),
       form=st.sampled_from(FORMS), cutoff=st.sampled_from(CUTOFFS),
       size=st.sampled_from([1, 40, 300, 4096]), gather=st.sampled_from([1, 3, 1024]))
def test_written_where_searched_is_written_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     ranks: list[bytes], pattern: str, form: Form,
                                                     cutoff: bytes | None, size: int, gather: int) -> None:
    monkeypatch.setattr("sparktui.core.rungrep.GATHER", gather)
    paths = {}
    for rank, data in enumerate(ranks):
        paths[rank] = tmp_path / f"r{rank}.log"
        paths[rank].write_bytes(data)
    line_filter = LineFilter.parse(pattern)
    search = BlockSearch.of(line_filter)
    got = new_written(paths, search, form, cutoff, size)
    assert got == old_written(paths, search, form, cutoff, size)
    if cutoff is None and not form.timestamps:
        want = [f"r{rank} {text}" for rank, text in console_order(paths, line_filter)]
        assert got.decode("utf-8", "replace").split("\n")[:-1] == [
            line if form.raw else visible(line) for line in want]


def test_a_big_run_over_the_workers_is_written_as_in_one_process(tmp_path: Path) -> None:
    """Four ranks whose stamps tie across ranks and within each (a runtime's microseconds), one
    with trimmed stamps, one whose clock steps back once; through worker processes (frames of
    records) and in one process, against the tuples' merge."""
    paths = {}
    for rank in range(4):
        rows = []
        for i in range(6000):
            tick = i // 3 if rank < 2 else i  # three lines a stamp: ties within a rank
            if rank == 3 and i == 4000:
                tick -= 500  # the clock steps back
            frac = f"{tick % 1000:03d}{rank % 2 * 500:03d}"
            text = f"2026-01-01T00:{tick // 60000:02d}:{tick // 1000 % 60:02d}.{frac}" + \
                ("Z" if rank != 1 else "000Z")
            if rank == 2:
                text = text.replace("000Z", "Z")  # docker's trimmed zeros
            body = ("needle " if i % 5 else "hay ") + f"{rank}:{i}" + ("\x1b[1m" if i % 97 == 0 else "")
            rows.append(f"{text}\t{body}\n")
        paths[rank] = tmp_path / f"r{rank}.log"
        paths[rank].write_text("".join(rows))
    search = BlockSearch.of(LineFilter.parse("needle"))
    for form in FORMS[:2]:
        for cutoff in (None, b"2026-01-01T00:00:01.500000000Z"):
            want = old_written(paths, search, form, cutoff, 4096)
            assert new_written(paths, search, form, cutoff, 4096) == want
            with searching(paths, search, size=4096, workers=3, form=form) as sources:
                assert b"".join(merge_lines(sources, cutoff=cutoff)) == want  # type: ignore[arg-type]
    assert want.count(b"\n") > 3000


def test_records_out_of_order_are_an_error_not_a_hang() -> None:
    """The searches send each batch sorted; one that is not would leave the merge without a
    record to write, and it says so rather than wait forever."""
    def record(second: int, rank: int, text: bytes) -> bytes:
        return b"2026-01-01T00:00:%02d.000000000Z%08x%016x" % (second, rank, 0) + text

    fine = {0: iter([record(1, 0, b"r0 a") + b"\n" + record(3, 0, b"r0 b")]),
            1: iter([record(2, 1, b"r1 c")])}
    assert b"".join(merge_lines(fine)) == b"r0 a\nr1 c\nr0 b\n"
    unsorted = {0: iter([b"\n".join([record(5, 0, b"r0 a"), record(6, 0, b"r0 b"),
                                      record(1, 0, b"r0 c")])]),
                1: iter([record(3, 1, b"r1 c") + b"\n" + record(9, 1, b"r1 d")])}
    with pytest.raises(RuntimeError, match="out of order"):
        list(merge_lines(unsorted))
