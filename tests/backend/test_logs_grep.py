"""``sparktui logs --grep`` is the console's grep: over a real run of ``demo-tp4`` on the local
cluster it prints exactly the lines the console's log panel keeps for the same pattern, every
rank merged in the same capture order."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.core.blockgrep import BlockSearch
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import RunScan
from sparktui.core.runstore import Run, RunStore
from sparktui.ui.logstore import RANK, TEXT, LogStore
from tests.runner import Cli, local_env, sparktui_run

WORLD = 4


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    sparktui = sparktui_run(local_env(tmp_path))
    started = False

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        nonlocal started
        started = started or args[0] == "up"
        return sparktui(*args)

    yield run
    if started:
        run("down", "recipes/demo-tp4")


def console_keeps(run: Run, pattern: str) -> list[tuple[int, str]]:
    """What the console's log panel shows under ``pattern`` for every rank, in its order: the
    run's files scanned as its grep scans them (``RunScan``), checked against its in-memory
    path (the store's windows merged, through the same filter)."""
    f = LineFilter.parse(pattern)
    assert f.active and f.error is None
    ranks = list(range(WORLD))
    paths = {rank: run.log(rank).path for rank in ranks}
    scanned = RunScan(paths, BlockSearch.of(f), cap=10**9).run().lines
    store = LogStore(WORLD, window=10**9)
    for rank in ranks:
        store.add(rank, run.log(rank).read())
    assert [line for line in store.view(ranks) if f.matches(line[TEXT])] == scanned
    return [(line[RANK], line[TEXT]) for line in scanned]


def printed(stdout: str) -> list[tuple[int, str]]:
    """``r<rank> <text>`` lines back into ``(rank, text)``."""
    out = []
    for line in stdout.split("\n")[:-1]:
        rank, _, text = line.partition(" ")
        assert rank.startswith("r"), line
        out.append((int(rank[1:]), text))
    return out


def test_logs_grep_prints_what_the_console_keeps(cli: Cli, tmp_path: Path) -> None:
    up = cli("up", "recipes/demo-tp4", "--wait")
    assert up.returncode == 0, up.stderr
    down = cli("down", "recipes/demo-tp4")  # the files stop growing: both read the same lines
    assert down.returncode == 0, down.stderr
    run = RunStore(tmp_path / "state" / "sparktui").latest("demo-tp4")
    assert run is not None

    # smart case: no capital, so "demo rendezvous" finds the engine's "DEMO rendezvous" lines
    smart = cli("logs", "recipes/demo-tp4", "--grep", "demo rendezvous")
    assert smart.returncode == 0, smart.stderr
    lines = printed(smart.stdout)
    assert lines == console_keeps(run, "demo rendezvous")
    assert {rank for rank, _ in lines} == set(range(WORLD))
    assert all("DEMO rendezvous" in text for _, text in lines)

    # inverted, and case-sensitive (a capital): every line without "DEMO", lines with "demo" kept
    inverted = cli("logs", "recipes/demo-tp4", "--grep", "!DEMO")
    assert inverted.returncode == 0, inverted.stderr
    lines = printed(inverted.stdout)
    assert lines == console_keeps(run, "!DEMO")
    assert not any("DEMO" in text for _, text in lines)
    assert {rank for rank, text in lines if "sparktui demo engine" in text} == set(range(WORLD))
    every = sum(1 for rank in range(WORLD) for _ in run.log(rank).read())
    with_demo = sum(1 for rank in range(WORLD) for _, _, text in run.log(rank).read() if "DEMO" in text)
    assert len(lines) == every - with_demo > 0

    # one rank, the same filter
    one = cli("logs", "recipes/demo-tp4", "--rank", "2", "--grep", "demo rendezvous")
    assert printed(one.stdout) == [kept for kept in console_keeps(run, "demo rendezvous") if kept[0] == 2]


@pytest.mark.parametrize(("pattern", "sentence"), [
    ("rendezvous(", "error: grep pattern 'rendezvous(': bad regex: missing ), unterminated subpattern "
                    "at position 10"),
    ("[/red](", "error: grep pattern '[/red](': bad regex: missing ), unterminated subpattern "
                "at position 6"),  # printed verbatim, not read as markup
    ("!x[", "error: grep pattern '!x[': bad regex: unterminated character set at position 2"),
    ("!", "error: grep pattern '!': nothing after '!'"),
])
def test_logs_grep_refuses_a_bad_pattern_in_one_sentence(cli: Cli, pattern: str, sentence: str) -> None:
    res = cli("logs", "recipes/demo-tp4", "--grep", pattern)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith(sentence) and res.stderr.count("\n") == 1, res.stderr
