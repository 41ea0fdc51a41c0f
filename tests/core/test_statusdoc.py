"""The follower's status document is shown only while it is the truth: its writer still holds
the run, wrote it lately, for this run, cluster and plan; anything else is worked out again."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.core.runstore import Run, RunStore
from sparktui.core.statusdoc import FRESH_S, STATUS_FILE, followed_status, write_status

PLAN = "ab12cd34"


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Run, int]]:
    """A run whose ``follow.lock`` another process holds, as a console or watch does."""
    run = RunStore(tmp_path).create("demo")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print('held', flush=True); sys.stdin.read()"), str(run.dir / "follow.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    try:
        yield run, holder.pid
    finally:
        holder.communicate("", timeout=10)


def doc(of: Run, pid: int, at: float, **over: object) -> dict[str, object]:
    return {"recipe": "demo", "run": of.id, "plan_hash": PLAN, "cluster": "local", "ranks": [],
            "nodes": [{"node": f"local{i}", "status": "ok", "detail": "", "warnings": [],
                       "sample": {}} for i in range(2)],
            "source": {"follower": "the watch", "pid": pid, "at": at}, **over}


def shown(run: Run) -> dict[str, object] | None:
    return followed_status(run, plan_hash=PLAN, cluster="local", now=time.time())


def test_the_followers_fresh_document_is_shown(held: tuple[Run, int]) -> None:
    run, pid = held
    assert write_status(run.dir, json.dumps(doc(run, pid, time.time())))
    got = shown(run)
    assert got is not None and got["source"] == {"follower": "the watch", "pid": pid, "at": got["source"]["at"]}  # type: ignore[index]
    assert stat.S_IMODE((run.dir / STATUS_FILE).stat().st_mode) == 0o600
    assert [p.name for p in run.dir.iterdir() if p.name.startswith(".")] == []  # nothing left aside


@pytest.mark.parametrize("why", ["old", "future", "other pid", "other run", "other plan",
                                 "other cluster", "a node stale", "damaged", "not an object",
                                 "no source"])
def test_a_document_that_may_not_be_the_truth_is_not_shown(held: tuple[Run, int], why: str) -> None:
    run, pid = held
    now = time.time()
    text = {
        "old": json.dumps(doc(run, pid, now - FRESH_S - 1)),
        "future": json.dumps(doc(run, pid, now + 30)),
        "other pid": json.dumps(doc(run, pid + 1, now)),  # the follower before this one wrote it
        "other run": json.dumps(doc(run, pid, now, run="demo-20200101-000000")),
        "other plan": json.dumps(doc(run, pid, now, plan_hash="ffff0000")),  # the recipe changed
        "other cluster": json.dumps(doc(run, pid, now, cluster="sparks")),
        # the follower cannot sample it now: status asks the node itself and says why
        "a node stale": json.dumps(doc(run, pid, now, nodes=[
            {"node": "local0", "status": "ok"}, {"node": "local1", "status": "stale"}])),
        "damaged": json.dumps(doc(run, pid, now))[:-20],
        "not an object": "[1, 2]",
        "no source": json.dumps({**doc(run, pid, now), "source": None}),
    }[why]
    assert write_status(run.dir, text)
    assert shown(run) is None


def test_no_follower_no_document(tmp_path: Path) -> None:
    """Its writer gone (the lock released), a document left behind is never shown."""
    run = RunStore(tmp_path).create("demo")
    assert write_status(run.dir, json.dumps(doc(run, os.getpid(), time.time())))
    assert shown(run) is None
    assert run.try_lock()  # this process's own lock is not another's either
    try:
        assert shown(run) is None
    finally:
        run.unlock()


def test_a_document_that_cannot_be_written_leaves_nothing(tmp_path: Path) -> None:
    """A write that fails (here the rename: a folder is in the way; a full disk fails the
    write before it) is False and leaves nothing aside."""
    run = RunStore(tmp_path).create("demo")
    (run.dir / STATUS_FILE).mkdir()
    (run.dir / STATUS_FILE / "x").write_text("")
    assert not write_status(run.dir, '{"x": 1}')
    assert sorted(p.name for p in run.dir.iterdir() if "status" in p.name) == [STATUS_FILE]
