"""Private folders for the unix sockets that reach the nodes' Docker engines.

A node's Docker engine is root on the node. Its socket used to be forwarded to a TCP port on
127.0.0.1, which every local user of a shared jump host could reach; a unix socket inside a
folder only this user can enter (0700) is reachable by this user alone (issue 15).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import stat
import tempfile

SOCKET_NAME = "docker.sock"
_FOLDERS: set[str] = set()
"""Private folders made for forwarded sockets and not yet removed: removed at exit too, for a
process that ends without closing its tunnels."""


@atexit.register
def _remove_folders() -> None:
    for folder in list(_FOLDERS):
        shutil.rmtree(folder, ignore_errors=True)
        _FOLDERS.discard(folder)


def _safe_parent(path: str) -> bool:
    """Nobody else can rename or replace what this user makes in ``path``: the folder is ours and
    only we may write to it, or it is sticky (``/tmp``)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    return bool(st.st_mode & stat.S_ISVTX) or (st.st_uid == os.getuid() and not st.st_mode & 0o022)


def private_folder() -> str:
    """A new folder only this user can enter (``mkdtemp`` makes it 0700), for the unix socket
    that reaches a node's Docker engine: in the user's runtime folder (``XDG_RUNTIME_DIR``), else
    the temporary folder. A unix socket path holds at most 107 bytes (103 on macOS), so a parent
    too long for one is passed over. The name carries this process's id, so folders left by a
    sparktui that was killed are recognised and removed here."""
    tried: list[str] = []
    for parent in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"):
        if not parent or parent in tried:
            continue
        tried.append(parent)
        prefix = f"sparktui-{os.getpid()}-"
        if len(os.path.join(parent, prefix + "x" * 8, SOCKET_NAME).encode()) > 103:  # macOS: 104
            continue
        if _safe_parent(parent):
            _sweep(parent)
            folder = tempfile.mkdtemp(prefix=prefix, dir=parent)
            _FOLDERS.add(folder)
            return folder
    raise OSError(f"no folder to keep a private socket in ({', '.join(tried)} are missing, "
                  "writable by others or too long a path); set XDG_RUNTIME_DIR to a folder of yours")


_OURS = re.compile(r"sparktui-(\d+)-[a-z0-9_]{8}")


def _sweep(parent: str) -> None:
    """Remove this user's socket folders whose sparktui is gone (killed: no cleanup ran)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            match = _OURS.fullmatch(entry.name)
            if match is None or not entry.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                    continue
                pid = int(match.group(1))
                if pid == os.getpid() or _alive(pid):
                    continue
                shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, another user's: not ours to judge
    return True


def remove_folder(folder: str) -> None:
    """On close: the socket in it is dead once its listener is closed."""
    shutil.rmtree(folder, ignore_errors=True)
    _FOLDERS.discard(folder)
