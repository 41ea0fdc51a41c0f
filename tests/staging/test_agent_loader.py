"""How staging starts the agent on a node (``backend/staging.py``, ``LOADER``): its bytecode
when the node's Python reads this one's, its text otherwise, and nothing from the node's
site-packages either way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sparktui.backend.staging import agent_argv, agent_input
from tests.staging.ckpt import Checkpoint, make_checkpoint
from tests.staging.test_agent import PYTHON, done, job, run_agent


def run(python: str, ckpt: Checkpoint, dst: Path, stdin: str, **kw: object) -> dict[str, object]:
    rc, events = run_agent(job(ckpt, dst, **kw), python=python, stdin=stdin)
    assert rc == 0, events
    return done(events)


def statuses(result: dict[str, object]) -> set[str]:
    return {f["status"] for f in result["files"]}  # type: ignore[attr-defined]


def test_the_bytecode_runs_when_the_versions_match_and_the_text_when_not(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "hf")
    dst = tmp_path / "dst"
    magic, code, source = agent_input().split("\n", 2)
    # this Python's bytecode: the text is not even compiled (here it would not compile)
    packed = run(sys.executable, ckpt, dst, "\n".join((magic, code, "this is not python")))
    assert statuses(packed) == {"packed"}
    # another version's bytecode (its magic says so): the text is compiled and run
    other = run(sys.executable, ckpt, dst, "\n".join(("0d0d0a00", "!!!", source)), verify_only=True)
    assert statuses(other) == {"verified"}
    assert [f["name"] for f in other["files"]] == [f["name"] for f in packed["files"]]  # type: ignore[attr-defined]


def test_the_nodes_site_packages_are_not_run(tmp_path: Path) -> None:
    """A ``.pth`` line in the node's site-packages runs code at every start of its Python
    (here it would leave a file): the agent starts without them (``-S``)."""
    venv = tmp_path / "node-python"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    marker = tmp_path / "pth-ran"
    Path(purelib, "planted.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    subprocess.run([str(venv / "bin" / "python"), "-c", "pass"], check=True)
    assert marker.exists()  # the line does run at an ordinary start
    marker.unlink()
    result = run(str(venv / "bin" / "python"), make_checkpoint(tmp_path / "hf"), tmp_path / "d",
                 agent_input())
    assert statuses(result) == {"packed"} and not marker.exists()


def test_a_verification_imports_only_what_it_uses(tmp_path: Path) -> None:
    """Every module is import time at every run on every node: a verification that finds
    everything in place loads neither pathlib (with urllib), contextlib, hashlib (with OpenSSL)
    nor packing's queue and threading."""
    ckpt = make_checkpoint(tmp_path / "hf")
    dst = tmp_path / "dst"
    run(PYTHON, ckpt, dst, agent_input())
    argv = agent_argv(job(ckpt, dst, verify_only=True), PYTHON)
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], input=agent_input(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout.splitlines()[-1])["event"] == "done"
    loaded = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "json" in loaded  # the listing is there
    assert not loaded & {"pathlib", "urllib", "urllib.parse", "contextlib", "hashlib", "_hashlib",
                         "queue", "threading", "typing", "dataclasses"}, sorted(loaded)
