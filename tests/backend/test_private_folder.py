"""Where the nodes' Docker sockets are forwarded to on this machine: a folder only this user
can enter, in a parent nobody else can rename things in, removed on close or, after a kill, by
the next sparktui (the real forwarding is tested on the test cluster in
tests/realparts/test_shared_machine.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.backend import sockdir


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's runtime folder, short (pytest's tmp_path makes a socket path too long)."""
    path = Path(tempfile.mkdtemp(prefix="rt-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_folder_is_private_and_in_the_runtime_dir(run: Path) -> None:
    folder = Path(sockdir.private_folder())
    try:
        assert folder.parent == run
        assert folder.name.startswith(f"sparktui-{os.getpid()}-")
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    finally:
        sockdir.remove_folder(str(folder))
    assert not folder.exists()


def test_a_runtime_dir_others_may_write_to_is_passed_over(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user who may write to the parent could move our folder away and put one of theirs
    in its place; the sticky /tmp does not allow that, a plain 0777 folder does."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    monkeypatch.setenv("TMPDIR", str(shared))
    folder = Path(sockdir.private_folder())
    try:
        assert folder.parent == Path("/tmp")
    finally:
        sockdir.remove_folder(str(folder))


def test_folders_of_a_killed_sparktui_are_swept(run: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = run / f"sparktui-{gone.stdout.strip()}-abcdefgh"
    alive = run / f"sparktui-{os.getppid()}-abcdefgh"
    other = run / "sparktui-notes"
    for path in (dead, alive, other):
        path.mkdir(mode=0o700)
        (path / "docker.sock").touch()
    folder = Path(sockdir.private_folder())
    try:
        assert sorted(p.name for p in run.iterdir()) == sorted([alive.name, other.name, folder.name])
    finally:
        sockdir.remove_folder(str(folder))
