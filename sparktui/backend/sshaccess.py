"""What decides whether sparktui may log in to a node, checked before it tries, and the sentence
for each SSH failure.

Keys: the cluster file's ``ssh.identity``, else the default keys asyncssh offers from ``~/.ssh``
(and the agent). A key other users can read is refused, as OpenSSH refuses it (issue 15); an
encrypted one is named with what to do, since sparktui never asks for a passphrase (issue 14).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import stat
from collections.abc import Sequence

import asyncssh

from sparktui.core.cluster import Cluster, Node
from sparktui.core.problems import Problem


def expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else None


def identity_problem(node: Node) -> str | None:
    """Why the node's ``ssh.identity`` (or, when none is set, one of the default keys asyncssh
    would offer) cannot be used, as a sentence with what to do; None when it can. Checked before
    connecting: a missing file otherwise reads as "cannot reach the node", and an encrypted one
    as a traceback."""
    if not node.ssh.identity:
        return next(filter(None, (_exposed(path, _shown(path)) for path in _default_keys())), None)
    return load_identity(node)[1]


DEFAULT_KEYS = ("id_ed25519_sk", "id_ecdsa_sk", "id_ed448", "id_ed25519", "id_ecdsa", "id_rsa",
                "id_dsa")
"""The files asyncssh offers from ``~/.ssh`` when no identity is given (its ``_DEFAULT_KEY_FILES``)."""


def _default_keys() -> list[str]:
    home = os.path.expanduser("~")
    if home.startswith("~"):
        return []
    return [p for p in (os.path.join(home, ".ssh", name) for name in DEFAULT_KEYS)
            if os.path.isfile(p)]


def _shown(path: str) -> str:
    """``path`` with the home folder written as ``~``, as the operator knows it."""
    home = os.path.expanduser("~")
    return "~" + path[len(home):] if not home.startswith("~") and path.startswith(home + "/") else path


def _exposed(path: str, shown: str) -> str | None:
    """A sentence when other users can read (or write) the private key at ``path``: it is no
    longer private, and OpenSSH refuses such a key too."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # reading it says why
    if mode & 0o077:
        return (f"identity file {shown} can be read by other users (mode {stat.S_IMODE(mode):04o}) "
                f"and is refused, as OpenSSH refuses it: run chmod 600 {shown}")
    return None


def _agent_running() -> bool:
    sock = os.environ.get("SSH_AUTH_SOCK")
    return sock is not None and sock != "" and os.path.exists(sock)


def load_identity(node: Node) -> tuple[asyncssh.SSHKey | None, str | None]:
    shown = node.ssh.identity
    if not shown:
        return None, None
    path = expand(shown)
    assert path is not None
    if path.startswith("~"):
        return None, (f"identity file {shown}: there is no home folder to expand ~ in; write "
                      "the full path")
    if not os.path.isfile(path):
        return None, (f"identity file {shown} does not exist" if not os.path.exists(path) else
                      f"identity file {shown} is not a file") + "; fix ssh.identity in the cluster file"
    exposed = _exposed(path, shown)
    if exposed is not None:
        return None, exposed
    try:
        return asyncssh.read_private_key(path), None
    except asyncssh.KeyImportError as exc:
        if "passphrase" in str(exc).lower():
            return None, "identity file " + _encrypted(shown, identity_set=True)
        return None, f"identity file {shown} is not a private key sparktui can read ({exc})"
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, f"identity file {shown} cannot be read: {why}"


def _encrypted(shown: str, identity_set: bool) -> str:
    """The sentence for an encrypted key: sparktui never asks for a passphrase, so the key must
    come from ssh-agent, and whether one is running changes what to do."""
    unset = "leave ssh.identity unset and " if identity_set else ""
    said = f"{shown} is encrypted and sparktui does not ask for passphrases"
    if _agent_running():
        return (f"{said}: {unset}load the key into ssh-agent (ssh-add {shown}), or use a key "
                "without a passphrase")
    return (f"{said}, and no ssh-agent is running (SSH_AUTH_SOCK is not set): start one "
            f'(eval "$(ssh-agent)"), ssh-add {shown}, {unset}run sparktui from that shell; or use '
            "a key without a passphrase")


def _encrypted_default_key() -> str | None:
    """The first default key that is encrypted, shown with ``~``: asyncssh skips those silently
    when no agent holds them, and the login is then refused without saying why."""
    for path in _default_keys():
        try:
            asyncssh.read_private_key(path)
        except asyncssh.KeyImportError as exc:
            if "passphrase" in str(exc).lower():
                return _shown(path)
        except (OSError, ValueError):
            continue
    return None


NO_LOGIN = ("this machine's user has no name to log in with (no passwd entry, no USER): set "
            "ssh.user in the cluster file")


def login_problem(node: Node) -> str | None:
    """Why there is no user name to log in to ``node`` with; None when there is one."""
    return NO_LOGIN if login_name(node) is None else None


def access_problems(cluster: Cluster, nodes: Sequence[Node]) -> list[Problem]:
    """What stops sparktui from even trying to log in to ``nodes``, each at its key in the
    cluster file: an identity file that cannot be used, no user name to log in with."""
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for node in nodes:
        for key, sentence in (("identity", identity_problem(node)), ("user", login_problem(node))):
            if sentence is not None and (key, sentence) not in seen:
                seen.add((key, sentence))
                problems.append(cluster.ssh_problem(node, key, sentence))
    return problems


def login_name(node: Node) -> str | None:
    """``ssh.user``, else the local user's name (as ssh does); None when there is none."""
    if node.ssh.user:
        return node.ssh.user
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def describe_ssh_error(node: Node, exc: BaseException) -> str:
    """One sentence for the operator: what failed and what to do."""
    where = f"{node.host}:{node.ssh_port}"
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        kh = node.ssh.known_hosts
        return (f"host key of {where} is not trusted by {kh} (changed or unknown); refusing to "
                f"connect. If the node was reinstalled, check the new key and replace the old one "
                f"(ssh-keygen -R {node.host} -f {kh}, then ssh {node.host} once)")
    if isinstance(exc, asyncssh.PermissionDenied):
        said = f"SSH login to {where} as {node.ssh.user or 'the current user'} was refused: {exc.reason}"
        locked = None if node.ssh.identity or _agent_running() else _encrypted_default_key()
        return said if locked is None else f"{said}; {_encrypted(locked, identity_set=False)}"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer from {where} within {node.ssh.connect_timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection to {where} refused (is sshd running?)"
    if isinstance(exc, OSError):
        return f"cannot reach {where}: {exc.strerror or exc}"
    if isinstance(exc, asyncssh.Error):
        return f"SSH to {where} failed: {exc.reason}"
    return f"SSH to {where} failed: {exc}"
