"""What sparktui keeps under its state and config folders is its user's alone: folders 0700,
files 0600 (run logs hold what engines print, plans and events what a recipe says).

Modes are given where each file and folder is created, never through the process umask (a
process-wide setting the user chose, shared by every thread). ``os.mkdir``'s mode is cut by the
umask, so a new folder is set 0700 explicitly afterwards; a new file's 0600 can only get tighter
under any umask. Files and folders from before this rule are tightened once (``tighten_once``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from typing import IO

DIR_MODE = 0o700
FILE_MODE = 0o600
TIGHTENED = ".private"
"""A file in the state folder saying its older files were tightened: the walk runs once."""


def opener(path: str, flags: int) -> int:
    """For ``open(..., opener=opener)``: a new file is created 0600, and a link in the file's
    place is refused (only its owner can put one in a private folder, but nothing here needs
    one)."""
    return os.open(path, flags | os.O_NOFOLLOW, FILE_MODE)


def private_open(path: Path, mode: str, encoding: str | None = None,
                 errors: str | None = None) -> IO[str]:
    """``open(path, mode)`` (text) creating the file 0600."""
    return open(path, mode, encoding=encoding, errors=errors, opener=opener)


def private_dir(path: Path) -> Path:
    """``mkdir -p path`` where every folder it creates is 0700; existing ones are left as they
    are (the parents above sparktui's own folders are the user's)."""
    missing: list[Path] = []
    at = path
    while not at.is_dir():
        missing.append(at)
        if at.parent == at:
            break
        at = at.parent
    for folder in reversed(missing):
        try:
            private_mkdir(folder)
        except FileExistsError:  # another process made it; it made it private
            if not folder.is_dir():
                raise
    return path


def private_mkdir(path: Path) -> Path:
    """A new folder, 0700 whatever the umask (``mkdir``'s mode is cut by it, never widened);
    ``FileExistsError`` when there is one already (a run id or rank id taken meanwhile)."""
    path.mkdir(DIR_MODE)
    os.chmod(path, DIR_MODE)
    return path


def write_private(path: Path, text: str) -> None:
    """``path`` replaced whole by ``text`` (written aside, fsynced, renamed), 0600."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    with open(tmp, "x", encoding="utf-8", opener=opener) as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def tighten_once(root: Path, files: tuple[Path, ...] = ()) -> str | None:
    """Take group and other permissions off every folder and file under ``root`` (and off
    ``files``, sparktui's own files in the config folder) once, then mark ``root`` done;
    a sentence saying what was tightened, or None when nothing was. Links are not followed."""
    marker = root / TIGHTENED
    if not root.is_dir() or marker.exists():
        return None
    folders = changed = 0
    for top in (root, *files):
        for path, is_dir in _walk(top):
            try:
                mode = stat.S_IMODE(os.lstat(path).st_mode)
                if mode & 0o077:
                    os.chmod(path, mode & 0o700)
                    folders += is_dir
                    changed += not is_dir
            except OSError:
                continue  # gone meanwhile, or not ours: the rest is still tightened
    with open(marker, "w", encoding="utf-8", opener=opener) as f:
        f.write("files under this folder are private (0600, folders 0700)\n")
    if not folders and not changed:
        return None
    return (f"sparktui: made {folders} folder(s) and {changed} file(s) under {root} private to "
            "you (they were readable by other users)")


def _walk(top: Path) -> list[tuple[str, bool]]:
    """``(path, is a folder)`` for ``top`` and everything under it, links left out."""
    try:
        top_st = os.lstat(top)
    except OSError:
        return []
    if stat.S_ISLNK(top_st.st_mode):
        return []
    if not stat.S_ISDIR(top_st.st_mode):
        return [(str(top), False)]
    out = [(str(top), True)]
    for base, dirs, names in os.walk(top):
        out += [(os.path.join(base, d), True) for d in dirs
                if not os.path.islink(os.path.join(base, d))]
        out += [(os.path.join(base, n), False) for n in names
                if not os.path.islink(os.path.join(base, n))]
    return out
