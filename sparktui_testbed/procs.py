"""Finding, waiting for and killing the processes of a node, and starting one inside it.

Daemons are started detached (re-parented to init), so they are found again from /proc: by
pidfile plus a command-line marker (a recycled pid is not mistaken for ours), and by the
node's network namespace, mount namespace or cgroup for everything else that lives there
(containerd, shims, containers, ssh sessions). Every wait is capped.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from .layout import Node
from .runner import TestbedError, daemon_env


def proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    st = proc_state(pid)
    return st is not None and st not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def read_pid(path: str | Path) -> int | None:
    try:
        txt = Path(path).read_text().strip()
    except OSError:
        return None
    return int(txt) if txt.isdigit() else None


def daemon_pid(pidfile: str | Path, marker: str) -> int | None:
    """The pid in pidfile if that process is alive and its command line contains marker."""
    pid = read_pid(pidfile)
    if pid and alive(pid) and any(marker in a for a in cmdline(pid)):
        return pid
    return None


def ns_inode(pid: int | str, kind: str) -> int | None:
    try:
        link = os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None
    m = re.search(r"\[(\d+)\]", link)
    return int(m.group(1)) if m else None


_NSFS_DEV: int | None = None


def _nsfs_dev() -> int:
    global _NSFS_DEV
    if _NSFS_DEV is None:
        _NSFS_DEV = os.stat("/proc/self/ns/net").st_dev
    return _NSFS_DEV


def ns_file_inode(path: str | Path) -> int | None:
    """Inode of the namespace bound at path, None if path is not a namespace handle."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino if st.st_dev == _nsfs_dev() else None


def kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _reap() -> None:
    """Reap exited children of this process (daemons we spawned via sh are not ours)."""
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break


def wait_gone(pids: Sequence[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        _reap()
        left = [p for p in left if alive(p)]
    return left


def terminate(pids: Sequence[int], timeout: float) -> list[int]:
    """SIGTERM, wait up to timeout, then SIGKILL and wait 5 s. Returns survivors."""
    pids = [p for p in pids if alive(p)]
    for p in pids:
        kill(p, signal.SIGTERM)
    left = wait_gone(pids, timeout)
    for p in left:
        kill(p, signal.SIGKILL)
    return wait_gone(left, 5.0)


def all_pids() -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]


def _pid_cgroups(pid: int) -> list[str]:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    return [ln.split(":", 2)[2] for ln in lines if ln.count(":") >= 2]


def node_pids(node: Node) -> list[int]:
    """Every process living in the node: its netns, its mount ns or its cgroup parent."""
    net = ns_file_inode(node.netns_path)
    mnt = ns_file_inode(node.mntns)
    cg = f"/{node.netns}"
    found = []
    for pid in all_pids():
        if (
            (net is not None and ns_inode(pid, "net") == net)
            or (mnt is not None and ns_inode(pid, "mnt") == mnt)
            or any(c == cg or c.startswith(cg + "/") for c in _pid_cgroups(pid))
        ):
            found.append(pid)
    return found


def in_own_uts(hostname: str, argv: Sequence[str]) -> list[str]:
    """argv run in a new UTS namespace named ``hostname`` (every step execs: same pid)."""
    return ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *argv]


def spawn_in_node(node: Node, argv: Sequence[str], log: str, hostname: str | None = None) -> int:
    """Start a daemon inside the node's net + mount namespaces, detached (re-parented to
    init, own session, output appended to log). nsenter execs the daemon, so the returned
    pid is the daemon's pid. ``hostname``: also in a UTS namespace of its own so named."""
    cmd = [
        "nsenter",
        f"--net={node.netns_path}",
        f"--mount={node.mntns}",
        "--",
        *(in_own_uts(hostname, argv) if hostname else argv),
    ]
    script = '"$@" </dev/null >>"$0" 2>&1 &\necho $!'
    try:
        cp = subprocess.run(
            ["sh", "-c", script, log, *cmd],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            env=daemon_env(),
            cwd="/",
            start_new_session=True,
            check=True,
        )
    except (subprocess.SubprocessError, OSError) as e:
        raise TestbedError(f"spawn {argv[0]}: {e}") from e
    return int(cp.stdout.decode().strip().splitlines()[-1])


def tcp_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
