"""A node user's login shell, changed for that node only: sshd runs every command through it
(``$SHELL -c``), so tests can log in to a node whose root has fish or tcsh.

The change is a copy of this machine's ``/etc/passwd`` with the user's shell field replaced,
bind-mounted over ``/etc/passwd`` inside the node's private mount namespace: the machine's own
file, and every other node, keep theirs. sshd reads the user's entry when a connection logs in,
so a connection opened before the change keeps the old shell.
"""

from __future__ import annotations

import os
from pathlib import Path

from .layout import Node
from .runner import TestbedError, run

PASSWD = "/etc/passwd"


def _in_node(node: Node, script: str, what: str) -> None:
    run(["nsenter", f"--mount={node.mntns}", "sh", "-c", script], what=what)


def changed_passwd(text: str, user: str, shell: str) -> str:
    """``/etc/passwd`` text with ``user``'s shell (the seventh field) set to ``shell``."""
    out, found = [], False
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) == 7 and fields[0] == user:
            fields[6], found = shell, True
        out.append(":".join(fields))
    if not found:
        raise TestbedError(f"no user {user!r} in {PASSWD}")
    return "\n".join(out) + "\n"


def set_login_shell(node: Node, user: str, shell: str | None) -> None:
    """Give ``user`` the login shell ``shell`` on ``node``; None puts the machine's entry back."""
    copy = Path(node.dir) / "passwd"
    # an earlier change is undone first (umount fails once nothing is mounted there)
    _in_node(node, f"while umount {PASSWD} 2>/dev/null; do :; done", "umount passwd")
    if shell is None:
        copy.unlink(missing_ok=True)
        return
    if not os.access(shell, os.X_OK):
        raise TestbedError(f"{shell} is not an executable shell here (install it first)")
    copy.write_text(changed_passwd(Path(PASSWD).read_text(), user, shell))
    copy.chmod(0o644)
    _in_node(node, f"mount --bind {copy} {PASSWD}", "mount passwd")
