"""A full disk under the run's files (a real tmpfs of a few pages, mounted in a mount namespace
of the test's own): a rank's batch that does not fit is taken back whole, no half line left to
look written and its lines numbered again when written later; an event that does not fit is kept
and written, in order, with the next one that does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = textwrap.dedent("""
    import errno, os, sys
    from pathlib import Path
    from sparktui.core.runstore import RankLog, Run

    top = Path(sys.argv[1])
    run = Run("r1", top / "run")
    run.dir.mkdir()
    log = RankLog(run.dir / "r0.log")
    batch = [("2026-12-04T00:00:00.000000001Z", "x" * 200 + f" {i}") for i in range(40)]
    written = []
    failed = None
    for _ in range(10_000):
        try:
            written += log.append(batch)
        except OSError as exc:
            failed = exc.errno
            break
    assert failed == errno.ENOSPC, failed
    while True:  # then line by line, until not even one fits
        try:
            written += log.append(batch[:1])
        except OSError:
            break
    data = (run.dir / "r0.log").read_bytes()
    assert data.endswith(b"\\n"), data[-80:]
    assert data.count(b"\\n") == len(written) == log.count, (data.count(b"\\n"), len(written), log.count)
    run.event("one", n=1)
    run.event("two", n=2)
    assert run.unwritten >= 1, "an event fitted on a full disk"
    assert [e["kind"] for e in run.events()][-2:] == ["one", "two"]
    text = (run.dir / "events.jsonl").read_bytes() if (run.dir / "events.jsonl").exists() else b""
    assert not text or text.endswith(b"\\n"), text
    log.truncate(len(written) // 2)  # room again
    more = log.append(batch[:3])
    assert [n for n, _, _ in more] == [len(written) // 2 + 1 + i for i in range(3)], more
    run.event("three", n=3)
    assert run.unwritten == 0
    lines = (run.dir / "events.jsonl").read_text().splitlines()
    assert [l.split('"kind": "')[1].split('"')[0] for l in lines] == ["one", "two", "three"], lines
    print("ok")
""")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root to mount a tmpfs in a mount namespace")
def test_a_full_disk_leaves_no_half_line_and_loses_no_event(tmp_path: Path) -> None:
    top = tmp_path / "small"
    top.mkdir()
    script = tmp_path / "fill.py"
    script.write_text(SCRIPT)
    res = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f'mount -t tmpfs -o size=64k tmpfs "{top}" && exec "{sys.executable}" "{script}" "{top}"'],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr
