"""The staging agent writes only where it should: never through a symbolic link, only into a
real folder of its own user, never into a literal ``~`` folder or a relative path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.staging.ckpt import Checkpoint, make_checkpoint
from tests.staging.test_agent import AGENT, PYTHON, job, run_agent

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="some cases need root (chown, setpriv)")


def agent(spec: dict[str, Any], env: dict[str, str] | None = None, cwd: Path | None = None,
          prefix: list[str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    return run_agent(spec, env=env, cwd=cwd, prefix=prefix)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Checkpoint:
    return make_checkpoint(tmp_path_factory.mktemp("ckpt") / "hf")


def test_a_link_at_a_packed_file_is_refused_and_its_target_kept(ckpt: Checkpoint, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    dst.mkdir()
    target = tmp_path / "precious"
    target.write_bytes(b"keep me")
    (dst / "engram-l1-r0of4.bin").symlink_to(target)
    rc, events = agent(job(ckpt, dst))
    assert rc == 1
    assert events[-1] == {"event": "error", "message": (
        f"testnode: {dst}/engram-l1-r0of4.bin is a symbolic link; sparktui writes only regular "
        f"files in {dst}: remove the link and stage again (its target was not touched)")}
    assert target.read_bytes() == b"keep me"
    (dst / "engram-l1-r0of4.bin").unlink()
    (dst / ".sparktui-ledger-r2of4.json").symlink_to(target)  # the ledger, too
    rc, events = agent(job(ckpt, dst))
    assert rc == 1 and "ledger-r2of4.json is a symbolic link" in events[-1]["message"]
    assert target.read_bytes() == b"keep me"


def test_a_link_planted_at_a_temporary_name_is_not_followed(ckpt: Checkpoint, tmp_path: Path) -> None:
    """Temporary names are predictable (host and pid): creating one replaces whatever sits
    there (a link included) instead of writing through it."""
    dst = tmp_path / "dst"
    dst.mkdir()
    target = tmp_path / "precious"
    target.write_bytes(b"keep me")
    script = (f"import os, sys, json; sys.argv = ['agent', {json.dumps(json.dumps(job(ckpt, dst)))}]; "
              f"import runpy; sr = runpy.run_path({str(AGENT)!r}); from pathlib import Path; "
              f"[os.symlink({str(target)!r}, sr['_tmp_name'](Path({str(dst)!r}) / n)) for n in "
              "('engram-l1-r0of4.bin', '.sparktui-ledger-r0of4.json')]; "
              "sys.exit(sr['main'](sys.argv))")
    proc = subprocess.run([PYTHON, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert target.read_bytes() == b"keep me"
    assert (dst / "engram-l1-r0of4.bin").read_bytes() == ckpt.expected(1, 0, 4)
    assert not [p for p in dst.iterdir() if p.is_symlink()]


def test_dst_must_be_a_real_folder_of_this_user(ckpt: Checkpoint, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    rc, events = agent(job(ckpt, link))
    assert rc == 1 and events[-1]["message"] == (
        f"testnode: {link} is a symbolic link; point dst at the real folder ({real})")
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 54321, 54321)
    rc, events = agent(job(ckpt, other))
    assert rc == 1 and "belongs to user 54321, not to this user (0)" in events[-1]["message"]
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    rc, events = agent(job(ckpt, shared))
    assert rc == 1 and "can be written by every user; chmod o-w" in events[-1]["message"]
    assert not list(other.iterdir()) and not list(shared.iterdir()) and not list(real.iterdir())


def test_tilde_is_expanded_here_or_refused_and_never_created(ckpt: Checkpoint, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "cwd"
    work.mkdir()
    work.chmod(0o777)
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    rc, events = agent(job(ckpt, Path("~/engram")), env=env, cwd=work)
    assert rc == 0, events[-1]
    assert (home / "engram" / "engram-l1-r0of4.bin").read_bytes() == ckpt.expected(1, 0, 4)
    rc, events = agent(job(ckpt, Path("relative/engram")), env=env, cwd=work)
    assert rc == 1 and events[-1]["message"] == (
        "testnode: dst relative/engram is a relative path; write the full path")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv missing: cannot run as a user without a home")
    # a user with no passwd entry and no HOME: ~ cannot be expanded, so it is refused
    readable = tmp_path / "ckpt-copy"
    shutil.copytree(ckpt.hf, readable / "hf", symlinks=True)
    os.chmod(tmp_path, 0o755)
    snapshot = readable / "hf" / ckpt.snapshot.relative_to(ckpt.hf)
    spec = {**job(ckpt, Path("~/engram")), "src": str(snapshot)}
    rc, events = agent(spec, env={"PATH": os.environ["PATH"]}, cwd=work,
                       prefix=["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups"])
    assert rc == 1 and events[-1]["message"] == (
        "testnode: dst ~/engram: there is no home folder here to expand ~ in; write the full path")
    assert sorted(p.name for p in work.iterdir()) == []  # no literal "~" folder
