"""Attaching to a long run: the checks fed only the lines their regexes match (searched in
blocks, ``core.replay``) end exactly as when fed every line since the restart, and the last lines
are the same, numbered as ``RankLog.read`` numbers them; a search kept in the run's folder
(``ReplayCache``) and continued after more lines finds what a search of the whole file finds."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.checks import BootChecks
from sparktui.core.cluster import local_cluster
from sparktui.core.engines import engine
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from sparktui.core.replay import REPLAY_FILE, ReplayCache, deciding_lines, last_lines
from sparktui.core.runstore import END_FIRST, RankLog
from tests.conftest import RECIPES, SEED

PIECES = [
    "Decode batch. #running-req: 3, #token: 2100",
    "DEMO rendezvous ok: world=4 rank=1",
    "KV cache ready: #tokens=65536",
    "max_total_num_tokens=8000000, chunked_prefill_size=4096, max_prefill_tokens=16384, "
    "max_running_requests=16, context_len=1048576",
    "The server is fired up and ready to roll!",
    'INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK',  # a request line: never evidence
    "Traceback (most recent call last):",
    "CUDA out of memory",
    "RoCEnante ok",
    "",
    "\x1b[31mred\x1b[0m \u202e °",
    "ready",
]


def checks_of(recipe: Path, *extra: str) -> BootChecks:
    plan = build_plan(load_recipe(recipe), local_cluster(4))
    bc = BootChecks.from_plan(plan.boot, plan.world, engine(plan.engine).request_line)
    for pattern in extra:
        bc.add("must_show", pattern, "all", added=True)
    bc.add("must_not_show", "re:^CUDA out", "all")
    return bc


def write(path: Path, rows: list[str], first: int = 0, mode: str = "wb") -> None:
    with path.open(mode) as f:
        for i, text in enumerate(rows, first):
            stamp = f"2026-12-03T10:00:{i % 60:02d}.{i:09d}Z"
            f.write(f"{stamp}\t{text}\n".encode() if i % 17 else f"{stamp}\t{text}\r\n".encode())


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.sampled_from(PIECES), max_size=80), after=st.integers(0, 40),
       rank=st.integers(0, 3), seed=st.booleans())
def test_the_matching_lines_decide_as_every_line_does(tmp_path_factory: object, rows: list[str],
                                                      after: int, rank: int, seed: bool) -> None:
    folder = tmp_path_factory.mktemp("replay")  # type: ignore[attr-defined]
    path = folder / f"r{rank}.log"
    write(path, rows)
    recipe = SEED if seed else RECIPES / "demo-tp4" / "recipe.toml"
    every = [(no, text) for no, _ts, text in RankLog(path).read() if no > after]
    want, got = checks_of(recipe, "re:ready$", "rendezvous ok: world=4 ..."), \
        checks_of(recipe, "re:ready$", "rendezvous ok: world=4 ...")
    want.feed(rank, every)
    got.feed(rank, deciding_lines(path, after, got.open_patterns(rank)))
    assert [(k, s.state, s.match) for k, s in sorted(got.status.items())] == \
        [(k, s.state, s.match) for k, s in sorted(want.status.items())]
    assert last_lines(path, after, 20) == [text for _, text in every[-20:]]


def test_no_open_check_reads_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r0.log"
    write(path, PIECES)
    assert deciding_lines(path, 0, []) == []


def test_lines_across_many_blocks_are_numbered_as_read(tmp_path: Path) -> None:
    """300,000 lines (27 MB, many of the search's blocks): the one that decides is found with
    the number ``RankLog.read`` gives it; ``bench/live_cli.py`` times it on a live run."""
    path = tmp_path / "r0.log"
    line = b"2026-12-03T10:00:00.123456789Z\tDecode batch. #running-req: 3, #token: 2100, gen throughput\n"
    path.write_bytes(line * 150_000 + b"2026-12-03T10:00:01Z\tKV cache ready: #tokens=1\n"
                     + line * 150_000)
    bc = checks_of(RECIPES / "demo-tp4" / "recipe.toml")
    assert deciding_lines(path, 0, bc.open_patterns(0)) == [(150_001, "KV cache ready: #tokens=1")]
    assert deciding_lines(path, 150_001, bc.open_patterns(0)) == []
    assert last_lines(path, 0, 2) == [line[31:-1].decode()] * 2


def decisions(bc: BootChecks) -> list[object]:
    return [(k, s.state, s.match) for k, s in sorted(bc.status.items())]


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.sampled_from(PIECES), max_size=60),
       more=st.lists(st.sampled_from(PIECES), max_size=60), after=st.integers(0, 40),
       rank=st.integers(0, 3), seed=st.booleans(),
       change=st.sampled_from(["append", "rewrite", "shorter", "rewound", "cut", "none"]))
def test_a_kept_search_continued_decides_as_every_line_does(
        tmp_path_factory: object, rows: list[str], more: list[str], after: int, rank: int,
        seed: bool, change: str) -> None:
    """The run's first attach searches the whole file and keeps what it found; the next, after
    the file grew (or was written again, cut, rewound, or ended inside a line), finds exactly
    the lines a search of the whole file finds, and the checks decide as fed every line."""
    folder = tmp_path_factory.mktemp("kept")  # type: ignore[attr-defined]
    path = folder / f"r{rank}.log"
    write(path, rows)
    recipe = SEED if seed else RECIPES / "demo-tp4" / "recipe.toml"
    patterns = checks_of(recipe, "re:ready$").open_patterns(rank)
    cache = ReplayCache.load(folder / REPLAY_FILE)
    assert deciding_lines(path, after, patterns, cache, rank) == deciding_lines(path, after, patterns)
    cache.save()
    rewinds = 0
    if change == "append":
        write(path, more, len(rows), "ab")
    elif change == "rewrite":  # the same size or more, other lines: the kept search is stale
        write(path, list(reversed(rows)) + more)
    elif change == "shorter":
        write(path, rows[: len(rows) // 2])
    elif change == "rewound":  # cut back by a reattach (its event counted), then written again
        write(path, rows[: len(rows) // 2] + more)
        rewinds = 1
    elif change == "cut":  # the last line still being written
        with path.open("ab") as f:
            f.write(b"2026-12-03T10:00:00.5Z\tready\r")
        write(path, more, len(rows), "ab")
    want = checks_of(recipe, "re:ready$")
    want.feed(rank, [(no, text) for no, _ts, text in RankLog(path).read() if no > after])
    got = checks_of(recipe, "re:ready$")
    again = ReplayCache.load(folder / REPLAY_FILE)
    found = deciding_lines(path, after, got.open_patterns(rank), again, rank, rewinds)
    assert found == deciding_lines(path, after, got.open_patterns(rank))
    got.feed(rank, found)
    assert decisions(got) == decisions(want)


def test_a_kept_search_is_read_and_only_the_new_lines_searched(tmp_path: Path) -> None:
    """What was kept is taken as it is (the lines before its place are not searched again),
    private to the operator; other patterns, or another file in the place, search it whole."""
    path = tmp_path / "r0.log"
    write(path, PIECES * 3)
    patterns = checks_of(RECIPES / "demo-tp4" / "recipe.toml").open_patterns(0)
    kept = tmp_path / REPLAY_FILE
    cache = ReplayCache.load(kept)
    whole = deciding_lines(path, 0, patterns, cache, 0)
    cache.save()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    entries = json.loads(kept.read_text())
    assert entries["0"]["offset"] == path.stat().st_size and entries["0"]["lines"] == 36
    entries["0"]["found"] = [[1, "kept, not searched again"]]
    kept.write_text(json.dumps(entries))
    write(path, ["KV cache ready: #tokens=1"], 36, "ab")
    assert deciding_lines(path, 0, patterns, ReplayCache.load(kept), 0) == [
        (1, "kept, not searched again"), (37, "KV cache ready: #tokens=1")]
    assert deciding_lines(path, 0, patterns[:1], ReplayCache.load(kept), 0) == \
        deciding_lines(path, 0, patterns[:1])
    os.rename(path, tmp_path / "r0.old")  # kept: the new file cannot take its inode
    write(path, PIECES * 3 + ["KV cache ready: #tokens=1"])  # another inode, the same bytes
    assert deciding_lines(path, 0, patterns, ReplayCache.load(kept), 0) == \
        [*whole, (37, "KV cache ready: #tokens=1")]
    kept.write_text("{not json")
    assert deciding_lines(path, 0, patterns, ReplayCache.load(kept), 0) == \
        [*whole, (37, "KV cache ready: #tokens=1")]


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.sampled_from([*PIECES, "x" * 3000, "Decode batch. " * 40]), max_size=60),
       first=st.sampled_from([1, 64, 512, 4096, 1 << 16]))
def test_a_narrow_first_read_of_the_end_gives_what_the_wide_one_does(
        tmp_path_factory: object, rows: list[str], first: int) -> None:
    """An attach reads each rank's last 64 KiB first (``END_FIRST``); when they hold too few
    lines, or no line of progress, the last lines and the last progress line are those of the
    last megabyte all the same."""
    path = tmp_path_factory.mktemp("end") / "r0.log"  # type: ignore[attr-defined]
    write(path, rows)
    log = RankLog(path)
    narrow = log.end(first)
    assert last_lines(path, 0, 20, narrow) == last_lines(path, 0, 20, log.end())
    for keep in (lambda text: "Decode" not in text, lambda text: text.startswith("x")):
        assert log.last(keep, end=narrow) == log.last(keep, end=log.end())


def test_a_progress_line_beyond_the_first_read_is_found(tmp_path: Path) -> None:
    """A rank whose last 64 KiB are all request lines (its probes, a line a second): its last
    progress line is further back, in its last megabyte, and is found there."""
    path = tmp_path / "r0.log"
    request = b'2026-12-03T10:00:02Z\tINFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK\n'
    path.write_bytes(b"2026-12-03T10:00:00Z\tearly\n" * 100 + b"2026-12-03T10:00:01Z\tKV cache ready\n"
                     + request * 2000)
    log = RankLog(path)
    narrow = log.end(END_FIRST)
    assert len(narrow[0]) == END_FIRST < narrow[1]
    assert log.last(lambda text: "GET /health" not in text, end=narrow) == \
        ("2026-12-03T10:00:01Z", "KV cache ready")
    assert last_lines(path, 0, 2, narrow) == [request[21:-1].decode()] * 2
