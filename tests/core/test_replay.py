"""Attaching to a long run: the checks fed only the lines their regexes match (searched in
blocks, ``core.replay``) end exactly as when fed every line since the restart, and the last lines
are the same, numbered as ``RankLog.read`` numbers them."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.checks import BootChecks
from sparktui.core.cluster import local_cluster
from sparktui.core.engines import engine
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from sparktui.core.replay import deciding_lines, last_lines
from sparktui.core.runstore import RankLog
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


def write(path: Path, rows: list[str]) -> None:
    with path.open("wb") as f:
        for i, text in enumerate(rows):
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
