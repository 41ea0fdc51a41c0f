"""``sparktui status`` beside a follower (here a real ``watch`` on the local cluster) shows the
follower's status document: no backend, no connect, the same ranks, checks and nodes a status
works out itself, and what happens to a rank meanwhile; the follower gone, it works it out
itself again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.core.statusdoc import STATUS_FILE
from tests.runner import Cli, local_env, sparktui_run, watching

SLUG = "demo-tp4"


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Cli]:
    """The local cluster, each command's timing marks in ``timing.log`` (which way it went)."""
    run = sparktui_run({**local_env(tmp_path), "SPARKTUI_TIMING": str(tmp_path / "timing.log")})
    yield run
    run("down", SLUG)


def marks_of(live: Cli, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    timing = tmp_path / "timing.log"
    timing.unlink(missing_ok=True)
    res = live(*args)
    assert res.returncode == 0, res.stderr
    return res, timing.read_text()


def same_ranks(doc: dict[str, object]) -> list[tuple[object, ...]]:
    ranks = doc["ranks"]
    assert isinstance(ranks, list)
    return [(r["rank"], r["node"], r["state"], r["container_id"], r["restarts"],
             json.dumps(r["checks"])) for r in ranks]


def test_a_status_beside_a_watch_shows_the_watchs_document(live: Cli, tmp_path: Path) -> None:
    assert live("up", SLUG, "--wait").returncode == 0
    worked, marks = marks_of(live, tmp_path, "status", SLUG, "--json")
    assert "attach: caught up" in marks, marks  # nothing follows: worked out here
    alone = json.loads(worked.stdout)
    assert alone["source"]["follower"] is None
    run = tmp_path / "state" / "sparktui" / "runs" / alone["run"]
    with watching(tmp_path, SLUG) as (watch, err):
        end = time.monotonic() + 60
        while not (run / STATUS_FILE).exists() or "waiting" in (run / STATUS_FILE).read_text():
            assert watch.poll() is None and time.monotonic() < end, err.read_text()
            time.sleep(0.2)  # its first document, once every node was sampled
        text, marks = marks_of(live, tmp_path, "status", SLUG)
        assert "the follower's document read" in marks, marks
        assert "ssh" not in marks and "attach" not in marks, marks  # no connect, no catch-up
        assert f"as the watch (pid {watch.pid}), which follows this run, saw it" in text.stdout
        assert "boot checks: 15/15 checks passed" in text.stdout
        assert all(f"local{i}: memory " in text.stdout for i in range(4)), text.stdout
        followed = json.loads(live("status", SLUG, "--json").stdout)
        assert followed["source"]["follower"] == "the watch" and followed["source"]["pid"] == watch.pid
        assert same_ranks(followed) == same_ranks(alone)
        assert [(c["pattern"], c["state"]) for c in followed["checks"]] == [
            (c["pattern"], c["state"]) for c in alone["checks"]]
        assert {n["node"] for n in followed["nodes"]} == {n["node"] for n in alone["nodes"]}
        assert all(n["sample"] and n["status"] == "ok" for n in followed["nodes"])

        # what happens meanwhile is there within a second or two: rank 2's engine killed
        os.kill(followed["ranks"][2]["engine"]["pid"], signal.SIGKILL)
        end = time.monotonic() + 20
        said: list[str] = []
        while True:  # rank 2 and the rest of its group failed, each container ended, and what
            doc = json.loads(live("status", SLUG, "--json").stdout)  # the watch says settled
            now = [r["detail"] for r in doc["ranks"]]
            if all(r["state"] == "failed" and r["exit_code"] is not None for r in doc["ranks"]):
                if now == said:
                    break
                said = now
            assert time.monotonic() < end, doc["ranks"]
            time.sleep(1.0)
        assert doc["source"]["follower"] == "the watch" and doc["restart_hint"] is True
        assert said[2].startswith("exited with code 137: ") and "demo tick" in said[2], said
        # the others fell with it ("; exited with code 4: ..." too when one was named first
        # before rank 2's own end was seen)
        assert all(said[r].startswith("rank 2 failed first") for r in (0, 1, 3)), said
    text, marks = marks_of(live, tmp_path, "status", SLUG)
    assert "attach: caught up" in marks and "which follows this run" not in text.stdout, marks
    assert "failed" in text.stdout and f"sparktui restart {SLUG} --group" in text.stdout
    # the watch gone, a status worked out alone says what it said of each rank's fall
    alone = json.loads(live("status", SLUG, "--json").stdout)
    assert alone["source"]["follower"] is None
    assert [r["detail"] for r in alone["ranks"]] == said
