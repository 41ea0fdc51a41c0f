"""``sparktui logs`` over a captured run: every rank merged in capture order, the console's grep,
``--rank``, ``--since`` and ``--timestamps``; a run that ended is read from its files alone
(a cluster that cannot be reached does not matter), any other asks its containers first (its
files searched meanwhile); big runs are searched by worker processes that print exactly what
one process prints."""

from __future__ import annotations

import heapq
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from sparktui.backend.grepwork import groups, searching
from sparktui.core.blockgrep import BlockSearch
from sparktui.core.errors import SparkError
from sparktui.core.linefilter import LineFilter
from sparktui.core.private import tighten_once
from sparktui.core.rungrep import merge_found, merged, norm_ts
from sparktui.core.runstore import RankLog
from tests.conftest import ROOT
from tests.runner import Cli, child_processes, local_env, sparktui_run, watching

SLUG = "demo-tp4"  # the shipped recipe: its runs are <state>/sparktui/runs/demo-tp4-<time>
UNREACHABLE = """name = "far"
hf_cache = "/srv/hf"
[ssh]
user = "nobody"
identity = "/nonexistent/id_ed25519"
""" + "".join(f'[[nodes]]\nname = "n{i}"\nhost = "192.0.2.{i + 1}"\n' for i in range(4))


def stamp(t: datetime) -> str:
    """As docker writes them: nanoseconds, trailing zeros trimmed."""
    frac = f"{t.microsecond:06d}000".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def make_run(state: Path, *, ended: bool, start: datetime, lines: int = 40) -> Path:
    """A run of four ranks as the follower writes it; ``ended``: a down removed everything."""
    run = state / "sparktui" / "runs" / f"{SLUG}-20260101-000000"
    run.mkdir(parents=True)
    for rank in range(4):
        rows = []
        for i in range(lines):
            t = start + timedelta(milliseconds=250 * i + 37 * rank)
            running = (i * 7 + rank) % 65
            rows.append(f"{stamp(t)}\tDecode batch. #running-req: {running}, #token: {i * 13}\n")
            if i % 9 == 0:
                rows.append(f'{stamp(t)}\tINFO:     10.0.0.{rank}:4{i:04d} - "POST /generate HTTP/1.1" 200 OK\n')
        (run / f"r{rank}.log").write_text("".join(rows))
    events = [{"ts": "2026-01-01T00:00:00.000000Z", "kind": "up"}]
    if ended:
        events.append({"ts": "2026-01-01T01:00:00.000000Z", "kind": "down", "kept": []})
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    tighten_once(state / "sparktui")  # private, as sparktui writes it (no notice to come)
    return run


def expected(run: Path, pattern: str, ranks: range = range(4)) -> list[str]:
    """``r<rank> <text>`` of every kept line, merged as the console merges them."""
    f = LineFilter.parse(pattern)
    per_rank = [[(norm_ts(ts), rank, no, text) for no, ts, text in RankLog(run / f"r{rank}.log").read()
                 if f.matches(text)] for rank in ranks]
    return [f"r{rank} {text}" for _ts, rank, _no, text in heapq.merge(*per_rank)]


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    (tmp_path / "far.toml").write_text(UNREACHABLE)
    run = sparktui_run(local_env(tmp_path), timeout=60)
    yield run


def test_an_ended_run_is_read_from_its_files_without_reaching_a_node(cli: Cli, tmp_path: Path) -> None:
    run = make_run(tmp_path / "state", ended=True, start=datetime(2026, 1, 1, tzinfo=timezone.utc))
    far = str(tmp_path / "far.toml")
    for pattern in ("#running-req: 6[0-4],", "!running", "POST", "post /generate"):
        res = cli("logs", SLUG, "--cluster", far, "--grep", pattern)
        assert res.returncode == 0 and res.stderr == "", res.stderr
        want = expected(run, pattern)
        assert want and res.stdout.splitlines() == want, pattern
        assert {line.split(" ", 1)[0] for line in want} == {"r0", "r1", "r2", "r3"}
    every = cli("logs", SLUG, "--cluster", far)
    assert every.stdout.splitlines() == expected(run, "")
    one = cli("logs", SLUG, "--cluster", far, "--rank", "2", "--grep", "post")
    assert one.stdout.splitlines() == expected(run, "post", range(2, 3))
    stamped = cli("logs", SLUG, "--cluster", far, "--rank", "1", "--timestamps", "--grep", "POST")
    first = stamped.stdout.splitlines()[0]
    assert first.startswith("r1 00:00:00.037 INFO:"), first  # the normalised time, to the ms


def test_called_in_a_process_that_goes_on_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    """As the program, a grep of an ended run ends its process at once (no teardown); called
    with its words (tests, an embedding tool) it returns like any verb."""
    from sparktui.cli import main

    run = make_run(tmp_path / "state", ended=True, start=datetime(2026, 1, 1, tzinfo=timezone.utc))
    for key, value in local_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    assert main(["logs", SLUG, "--grep", "POST"]) == 0
    assert capfd.readouterr().out.splitlines() == expected(run, "POST")


def test_a_run_that_may_still_write_asks_its_containers_first(cli: Cli, tmp_path: Path) -> None:
    make_run(tmp_path / "state", ended=False, start=datetime(2026, 1, 1, tzinfo=timezone.utc))
    res = cli("logs", SLUG, "--cluster", str(tmp_path / "far.toml"), "--grep", "POST")
    assert res.returncode == 2 and res.stdout == ""  # the cluster's identity file: nothing tried
    assert "/nonexistent/id_ed25519" in res.stderr


def test_since_keeps_the_newest_lines(cli: Cli, tmp_path: Path) -> None:
    now = datetime.now(timezone.utc)
    run = make_run(tmp_path / "state", ended=True, start=now - timedelta(minutes=30), lines=20)
    recent = run / "r3.log"
    recent.write_text(recent.read_text() + f"{stamp(now - timedelta(seconds=5))}\tfresh POST line\n")
    res = cli("logs", SLUG, "--since", "1m", "--grep", "post")
    assert res.stdout.splitlines() == ["r3 fresh POST line"]
    bad = cli("logs", SLUG, "--since", "soon")
    assert bad.returncode == 1 and "--since 'soon': use a duration such as 10m or 90s" in bad.stderr


def test_a_closed_pipe_ends_the_command_and_its_workers_quietly(tmp_path: Path) -> None:
    state = tmp_path / "state"
    run = make_run(state, ended=True, start=datetime(2026, 1, 1, tzinfo=timezone.utc))
    body = (run / "r0.log").read_bytes()
    for rank in range(4):  # 40 MiB: worker processes (grepwork.PARALLEL_BYTES)
        (run / f"r{rank}.log").write_bytes(body * (10 * 2**20 // len(body) + 1))
    env = {**os.environ, "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(tmp_path / "c")}
    proc = subprocess.run(f"'{sys.executable}' -m sparktui logs {SLUG} --grep running | head -3",
                          shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert len(proc.stdout.splitlines()) == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, str(state))]


def _mentions(proc: Path, text: str) -> bool:
    try:
        return text.encode() in (proc / "environ").read_bytes()
    except OSError:
        return False


def test_workers_send_exactly_what_one_process_finds(tmp_path: Path) -> None:
    run = make_run(tmp_path, ended=True, start=datetime(2026, 1, 1, tzinfo=timezone.utc), lines=400)
    paths = {rank: run / f"r{rank}.log" for rank in range(4)}
    for pattern in ("#running-req: 6[0-4],", "!running", "post", "nothing at all"):
        search = BlockSearch.of(LineFilter.parse(pattern))
        alone = [line for batch in merged(paths, search, size=512) for line in batch]
        with searching(paths, search, size=512, workers=3) as sources:
            assert len({id(s) for s in sources.values()}) == 4
            spread = [line for batch in merge_found(sources) for line in batch]
        assert spread == alone, pattern
    split = groups(paths, 3)  # every rank once, the biggest files apart
    assert len(split) == 3 and sorted(rank for group in split for rank in group) == [0, 1, 2, 3]


def test_a_big_run_gets_two_workers_a_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge shares the cores with the workers: twice as many workers as cores, so that it
    slows each a little (grepwork.PER_CPU), one rank each here."""
    run = make_run(tmp_path, ended=True, start=datetime(2026, 1, 1, tzinfo=timezone.utc), lines=400)
    paths = {rank: run / f"r{rank}.log" for rank in range(4)}
    search = BlockSearch.of(LineFilter.parse("running"))
    alone = [line for batch in merged(paths, search) for line in batch]
    monkeypatch.setattr("sparktui.backend.grepwork.PARALLEL_BYTES", 1)
    monkeypatch.setattr("sparktui.backend.grepwork.cpus", lambda: 2)
    before = _children()
    with searching(paths, search) as sources:
        assert len(_children() - before) == 4
        assert [line for batch in merge_found(sources) for line in batch] == alone
    monkeypatch.setattr("sparktui.backend.grepwork.cpus", lambda: 1)  # one core: no worker at all
    with searching(paths, search) as sources:
        assert _children() == before
        assert [line for batch in merge_found(sources) for line in batch] == alone


def _children() -> set[int]:
    """This process's child processes (a worker is a fork: no command line of its own)."""
    return {int(proc.name) for proc in child_processes()}


def test_a_worker_that_fails_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path, ended=True, start=datetime(2026, 1, 1, tzinfo=timezone.utc))
    paths = {rank: run / f"r{rank}.log" for rank in range(4)}

    def broken(*_args: object, **_kwargs: object) -> Iterator[list[object]]:
        raise OSError("disk on fire")
        yield []

    monkeypatch.setattr("sparktui.backend.grepwork.rank_found", broken)
    with pytest.raises(SparkError, match="grep failed: OSError: disk on fire"), \
            searching(paths, BlockSearch.of(LineFilter.parse("x")), workers=2) as sources:
        list(merge_found(sources))


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Cli]:
    """The local cluster, each command's timing marks in ``timing.log`` (which way it went)."""
    run = sparktui_run({**local_env(tmp_path), "SPARKTUI_TIMING": str(tmp_path / "timing.log")})
    yield run
    run("down", SLUG)


def history(run: Path, rows: int) -> None:
    """``rows`` lines a rank put in front of each rank's file, the cursors moved along (a run
    that has been up for hours: 4 x 9.5 MB, enough for the search's workers)."""
    cursors = json.loads((run / "cursors.json").read_text())
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for rank in range(4):
        data = "".join(f"{stamp(start + timedelta(milliseconds=10 * i + rank))}\tDecode batch. "
                       f"#running-req: {(i * 7 + rank) % 65}, #token: {i * 13}, history\n"
                       for i in range(rows)).encode()
        path = run / f"r{rank}.log"
        path.write_bytes(data + path.read_bytes())
        cursors[str(rank)]["lines"] += rows
        cursors[str(rank)]["bytes"] += len(data)
    (run / "cursors.json").write_text(json.dumps(cursors))


def test_a_live_run_is_searched_while_caught_up(live: Cli, tmp_path: Path) -> None:
    """A live run: what its files hold is searched while another process catches up, then what
    the catch-up added; when the catch-up rewrote a file (a rank's file cut back to its cursor,
    a rank's file made anew) it is searched again. Every time, exactly the lines the files hold
    once caught up, merged in capture order; never a line the catch-up cut off."""
    timing = tmp_path / "timing.log"
    up = live("up", SLUG, "--wait")
    assert up.returncode == 0, up.stderr
    run = next((tmp_path / "state" / "sparktui" / "runs").iterdir())
    history(run, 110_000)

    def logs(*words: str) -> tuple[list[str], str]:
        timing.unlink(missing_ok=True)
        time.sleep(1.5)  # the ranks write on: there is something to catch up
        res = live("logs", SLUG, *words)
        assert res.returncode == 0, res.stderr
        return res.stdout.splitlines(), timing.read_text()

    for words in (("--grep", "#running-req: 6[0-4],"), ()):
        lines, marks = logs(*words)
        assert lines == expected(run, words[1] if words else "")
        assert "search: 4 workers" in marks and "logs: printed" in marks
        assert "searched again" not in marks
    with (run / "r1.log").open("a") as f:  # left by a follower killed before saving its cursor
        f.write("2026-01-01T00:00:00.5Z\tDecode batch. #running-req: 61, cut off\n" * 3)
    lines, marks = logs("--grep", "#running-req: 6[0-4],")
    assert "searched again" in marks and not any("cut off" in line for line in lines)
    assert lines == expected(run, "#running-req: 6[0-4],")
    cursors = json.loads((run / "cursors.json").read_text())
    del cursors["3"]
    (run / "cursors.json").write_text(json.dumps(cursors))
    (run / "r3.log").unlink()  # caught up from its container's start
    lines, marks = logs()
    assert "searched again" in marks and lines == expected(run, "")
    assert any(line.startswith("r3 ") for line in lines)


def test_a_run_a_console_or_watch_follows_is_read_from_its_files_at_once(
        live: Cli, tmp_path: Path) -> None:
    """A live run that another sparktui follows (here ``watch``): its files are what a catch-up
    would give (nor could one copy anything: the follower holds the run), so ``logs`` reads them
    as an ended run's, to where each stands, without the backend or a connect. The follower
    writes on meanwhile: each rank's lines are the first of what its file holds after, merged
    in capture order, and at least what it held before."""
    up = live("up", SLUG, "--wait")
    assert up.returncode == 0, up.stderr
    run = next((tmp_path / "state" / "sparktui" / "runs").iterdir())
    history(run, 110_000)  # big enough for the search's workers
    with watching(tmp_path, SLUG):
        time.sleep(1.5)  # it follows: the ranks' files grow
        pattern = "#running-req: 6[0-4],"
        before = expected(run, pattern)
        timing = tmp_path / "timing.log"
        timing.unlink(missing_ok=True)
        res = live("logs", SLUG, "--grep", pattern)
        assert res.returncode == 0, res.stderr
        marks = timing.read_text()
    assert "the backend imported" not in marks and "caught up" not in marks, marks
    assert "search: 4 workers" in marks, marks
    lines = res.stdout.splitlines()
    shown = {rank: sum(line.startswith(f"r{rank} ") for line in lines) for rank in range(4)}
    assert lines == expected_prefixes(run, pattern, shown)
    held = {rank: sum(line.startswith(f"r{rank} ") for line in before) for rank in range(4)}
    assert all(shown[rank] >= held[rank] > 0 for rank in range(4)), (shown, held)


def expected_prefixes(run: Path, pattern: str, counts: dict[int, int]) -> list[str]:
    """``expected``, each rank's kept lines cut to its first ``counts[rank]``."""
    f = LineFilter.parse(pattern)
    per_rank = [[(norm_ts(ts), rank, no, text) for no, ts, text in RankLog(run / f"r{rank}.log").read()
                 if f.matches(text)][:counts[rank]] for rank in sorted(counts)]
    return [f"r{rank} {text}" for _ts, rank, _no, text in heapq.merge(*per_rank)]
