"""The mount table, each node's private mount namespace, unmounting and cgroup cleanup.

A node's own /home and /run are bind mounts inside a persistent mount namespace bound to a
file under the state dir. Teardown must undo every mount under the state dir (deepest first,
lazily if busy) before deleting files, and remove the cgroups dockerd made for the node, or
the next `up` trips over them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from pathlib import Path

from .layout import Node, Paths
from .runner import run, step


def _unescape_mount(s: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mounts() -> list[tuple[str, str]]:
    """(mountpoint, fstype) of the root mount namespace (this process's), in mount order."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        try:
            sep = parts.index("-")
        except ValueError:
            continue
        out.append((_unescape_mount(parts[4]), parts[sep + 1]))
    return out


def is_mountpoint(path: str | Path) -> bool:
    p = str(path)
    return any(mp == p for mp, _ in mounts())


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def umount_under(root: Path) -> list[str]:
    failed = []
    mps = sorted({mp for mp, _ in mounts() if under(mp, str(root))}, key=lambda p: (-p.count("/"), p))
    for mp in mps:
        for _ in range(10):  # a path can be mounted over several times
            if not is_mountpoint(mp):
                break
            cp = run(["umount", mp], what="umount", check=False)
            if cp.returncode != 0:
                cp = run(["umount", "-l", mp], what="umount", check=False)
                if cp.returncode != 0:
                    failed.append(mp)
                    break
    return failed


def _cgroup_roots() -> list[str]:
    return [mp for mp, fs in mounts() if fs in ("cgroup", "cgroup2")]


def rm_cgroups(name: str) -> None:
    for root in _cgroup_roots():
        top = Path(root) / name
        if not top.is_dir():
            continue
        dirs = [Path(dp) for dp, _, _ in os.walk(top)]
        for d in sorted(dirs, key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                d.rmdir()


def own_root(node: Node) -> str:
    """The node's own /root, empty as on a new machine: this machine's root's shell start files
    are not the node's (bash run by sshd reads ~/.bashrc: a pyenv init there took 0.15 s of
    every command sparktui runs over SSH, the telemetry sample and each doctor check among them)."""
    root = os.path.join(os.path.dirname(node.home), "root")
    os.makedirs(root, mode=0o700, exist_ok=True)
    return root


def setup_mntns(node: Node, paths: Paths) -> None:
    """Persistent private mount namespace with the node's own /home, /run and /root."""
    sd = str(paths.sd)
    with step(node.name, "mount namespace"):
        Path(node.mntns).touch()
        run(["unshare", f"--mount={node.mntns}", "--propagation", "private", "true"], what="unshare --mount")
        # In the copy of the mount table, drop other namespaces' handles (netns, other
        # nodes' mount ns) so this namespace keeps none of them alive.
        nsfs = [mp for mp, fs in mounts() if fs == "nsfs"]
        lines = ["set -e"]
        lines += [f"umount -l {shlex.quote(mp)} 2>/dev/null || true" for mp in nsfs]
        overmounts = [(node.home, "/home"), (node.run_dir, "/run"), (own_root(node), "/root")]
        for src, target in overmounts:
            if under(sd, target):  # keep the state dir visible under the overmount
                keep = os.path.join(src, os.path.relpath(sd, target))
                Path(keep).mkdir(parents=True, exist_ok=True)
                lines.append(f"mount --bind {shlex.quote(sd)} {shlex.quote(keep)}")
        for src, target in overmounts:
            lines.append(f"mount --rbind {shlex.quote(src)} {shlex.quote(target)}")
        run(["nsenter", f"--mount={node.mntns}", "sh", "-c", "\n".join(lines)], what="mounts in the node")


def ns_dir_private(paths: Paths) -> None:
    """unshare --mount=FILE needs FILE on a mount that is not shared."""
    paths.ns_dir.mkdir(parents=True, exist_ok=True)
    if not is_mountpoint(paths.ns_dir):
        run(["mount", "--bind", str(paths.ns_dir), str(paths.ns_dir)], what="bind ns dir")
    run(["mount", "--make-private", str(paths.ns_dir)], what="make ns dir private")
