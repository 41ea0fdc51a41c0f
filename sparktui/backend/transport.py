"""How sparktui reaches a node: one SSH connection (commands, SFTP, a tunnel to the node's
Docker socket, TCP connections opened on the node for health probes), or this machine directly
for the local cluster.

Commands are argument lists joined with ``shlex.join``: a recipe value never reaches a shell
unquoted. Host keys are always checked against ``known_hosts``.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shlex
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncssh

from sparktui.backend.http import ByteReader, ByteWriter
from sparktui.core.cluster import Cluster, Node
from sparktui.core.errors import Problem, SparkError

CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
           "aes256-ctr", "aes192-ctr", "aes128-ctr")
"""AES-GCM first: asyncssh runs it as one OpenSSL call per packet, 8x cheaper than its
ChaCha20-Poly1305 (four cipher objects per packet), which held an image sync at 80 MiB/s on the
event loop (docs/benchmarks.md). Every other cipher asyncssh offers stays as a fallback."""


class NodeError(SparkError):
    """A node could not be reached or refused us; the message names the node and the reason."""

    def __init__(self, node: str, reason: str) -> None:
        self.node = node
        self.reason = reason
        super().__init__(f"{node}: {reason}")


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Transport(Protocol):
    node: Node

    @property
    def connected(self) -> bool: ...

    async def connect(self) -> None: ...

    async def run(self, argv: list[str], timeout: float = 30.0) -> CommandResult: ...

    async def stream(self, argv: list[str], on_line: Callable[[str], None]) -> int: ...

    async def put(self, local: Path, remote: str) -> None: ...

    async def docker_url(self) -> str: ...

    async def open_connection(self, host: str, port: int) -> tuple[ByteReader, ByteWriter]:
        """A TCP connection to ``host:port`` as the node sees it (an ``http.Opener``); raises
        OSError when it cannot be opened."""
        ...

    async def close(self) -> None: ...


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else None


def identity_problem(node: Node) -> str | None:
    """Why the node's ``ssh.identity`` cannot be used, as a sentence with what to do; None when
    it can (or none is set). Checked before connecting: a missing file otherwise reads as
    "cannot reach the node", and an encrypted one as a traceback."""
    return _load_identity(node)[1]


def _load_identity(node: Node) -> tuple[asyncssh.SSHKey | None, str | None]:
    shown = node.ssh.identity
    if not shown:
        return None, None
    path = _expand(shown)
    assert path is not None
    if path.startswith("~"):
        return None, (f"identity file {shown}: there is no home folder to expand ~ in; write "
                      "the full path")
    if not os.path.isfile(path):
        return None, (f"identity file {shown} does not exist" if not os.path.exists(path) else
                      f"identity file {shown} is not a file") + "; fix ssh.identity in the cluster file"
    try:
        return asyncssh.read_private_key(path), None
    except asyncssh.KeyImportError as exc:
        if "passphrase" in str(exc).lower():
            return None, (f"identity file {shown} is encrypted and sparktui does not ask for "
                          "passphrases: leave ssh.identity unset and load the key into ssh-agent "
                          "(ssh-add), or use a key without a passphrase")
        return None, f"identity file {shown} is not a private key sparktui can read ({exc})"
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, f"identity file {shown} cannot be read: {why}"


NO_LOGIN = ("this machine's user has no name to log in with (no passwd entry, no USER): set "
            "ssh.user in the cluster file")


def login_problem(node: Node) -> str | None:
    """Why there is no user name to log in to ``node`` with; None when there is one."""
    try:
        _login(node)
    except NodeError as exc:
        return exc.reason
    return None


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


def _login(node: Node) -> str:
    """``ssh.user``, else the local user's name (as ssh does); a sentence when there is none."""
    if node.ssh.user:
        return node.ssh.user
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise NodeError(node.name, NO_LOGIN) from None

def describe_ssh_error(node: Node, exc: BaseException) -> str:
    """One sentence for the operator: what failed and what to do."""
    where = f"{node.host}:{node.ssh_port}"
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        kh = node.ssh.known_hosts
        return (f"host key of {where} is not trusted by {kh} (changed or unknown); refusing to "
                f"connect. If the node was reinstalled, check the new key and replace the old one "
                f"(ssh-keygen -R {node.host} -f {kh}, then ssh {node.host} once)")
    if isinstance(exc, asyncssh.PermissionDenied):
        return f"SSH login to {where} as {node.ssh.user or 'the current user'} was refused: {exc.reason}"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer from {where} within {node.ssh.connect_timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection to {where} refused (is sshd running?)"
    if isinstance(exc, OSError):
        return f"cannot reach {where}: {exc.strerror or exc}"
    if isinstance(exc, asyncssh.Error):
        return f"SSH to {where} failed: {exc.reason}"
    return f"SSH to {where} failed: {exc}"


class SshTransport:
    """One asyncssh connection per node, reopened on demand after it drops."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._conn: asyncssh.SSHClientConnection | None = None
        self._tunnel: asyncssh.SSHListener | None = None
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def connect(self) -> None:
        async with self._lock:
            if self.connected:
                return
            await self._drop()
            ssh = self.node.ssh
            known_hosts = _expand(ssh.known_hosts)
            if known_hosts is None or not Path(known_hosts).is_file():
                raise NodeError(self.node.name, f"known_hosts file {ssh.known_hosts} does not exist; "
                                "host keys are always verified")
            key, problem = _load_identity(self.node)
            if problem is not None:
                raise NodeError(self.node.name, problem)
            try:
                self._conn = await asyncio.wait_for(
                    asyncssh.connect(
                        self.node.host, port=self.node.ssh_port, username=_login(self.node),
                        client_keys=[key] if key is not None else (),
                        known_hosts=known_hosts, agent_path=None if ssh.identity else (),
                        keepalive_interval=5, keepalive_count_max=3,
                        connect_timeout=ssh.connect_timeout, encryption_algs=list(CIPHERS),
                    ),
                    timeout=ssh.connect_timeout + 5,
                )
            except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError) as exc:
                raise NodeError(self.node.name, describe_ssh_error(self.node, exc)) from None

    async def _drop(self) -> None:
        if self._tunnel is not None:
            self._tunnel.close()
            self._tunnel = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _connection(self) -> asyncssh.SSHClientConnection:
        if not self.connected:
            await self.connect()
        assert self._conn is not None
        return self._conn

    async def run(self, argv: list[str], timeout: float = 30.0) -> CommandResult:
        conn = await self._connection()
        try:
            res = await asyncio.wait_for(conn.run(shlex.join(argv), check=False), timeout)
        except (OSError, asyncssh.Error) as exc:
            raise NodeError(self.node.name, describe_ssh_error(self.node, exc)) from None
        except asyncio.TimeoutError:
            raise NodeError(self.node.name, f"{argv[0]} did not finish within {timeout:g} s") from None
        rc = res.exit_status if res.exit_status is not None else 255
        return CommandResult(rc, str(res.stdout or ""), str(res.stderr or ""))

    async def stream(self, argv: list[str], on_line: Callable[[str], None]) -> int:
        """Run ``argv`` on the node, handing over each stdout line as it arrives."""
        conn = await self._connection()
        try:
            async with conn.create_process(shlex.join(argv), stderr=asyncssh.STDOUT) as proc:
                async for line in proc.stdout:
                    on_line(str(line).rstrip("\n"))
                await proc.wait()
                return proc.exit_status if proc.exit_status is not None else 255
        except (OSError, asyncssh.Error) as exc:
            raise NodeError(self.node.name, describe_ssh_error(self.node, exc)) from None

    async def put(self, local: Path, remote: str) -> None:
        conn = await self._connection()
        try:
            async with conn.start_sftp_client() as sftp:
                await sftp.put(str(local), remote)
        except (OSError, asyncssh.Error) as exc:
            raise NodeError(self.node.name, f"copying {local.name} to {remote} failed: {exc}") from None

    async def docker_url(self) -> str:
        """A local TCP port forwarded to the node's Docker socket through this connection."""
        conn = await self._connection()
        async with self._lock:
            if self._tunnel is None:
                try:
                    self._tunnel = await conn.forward_local_port_to_path(
                        "127.0.0.1", 0, self.node.docker.socket)
                except (OSError, asyncssh.Error) as exc:
                    raise NodeError(self.node.name, f"cannot forward the Docker socket "
                                    f"{self.node.docker.socket}: {exc}") from None
            return f"tcp://127.0.0.1:{self._tunnel.get_port()}"

    async def open_connection(self, host: str, port: int) -> tuple[ByteReader, ByteWriter]:
        """A direct TCP channel from the node to ``host:port``, over the connection already
        open: an engine's port need not be reachable from this machine, only from its node.
        Never reconnects (the log follower does that); every failure is an OSError."""
        conn = self._conn
        if conn is None or conn.is_closed():
            raise ConnectionError(f"{self.node.name}: no SSH connection")
        try:
            reader, writer = await conn.open_connection(host, port)
        except asyncssh.Error as exc:  # ChannelOpenError: refused or unreachable on the node
            raise ConnectionError(f"{self.node.name}: {host}:{port}: {exc.reason}") from None
        channel = _Channel(self.node.name, reader, writer)
        return channel, channel

    async def close(self) -> None:
        async with self._lock:
            await self._drop()


class _Channel:
    """A direct TCP channel whose failures (the SSH link lost mid-request) are OSErrors, as a
    socket's are, so callers need to know nothing of asyncssh."""

    def __init__(self, node: str, reader: asyncssh.SSHReader[bytes],
                 writer: asyncssh.SSHWriter[bytes]) -> None:
        self._node = node
        self._reader = reader
        self._writer = writer

    def _lost(self, exc: asyncssh.Error) -> ConnectionError:
        return ConnectionError(f"{self._node}: {exc.reason}")

    async def read(self, n: int = -1, /) -> bytes:
        try:
            return await self._reader.read(n)
        except asyncssh.Error as exc:
            raise self._lost(exc) from None

    async def readuntil(self, separator: bytes = b"\n", /) -> bytes:
        try:
            return await self._reader.readuntil(separator)
        except asyncssh.Error as exc:
            raise self._lost(exc) from None

    async def readexactly(self, n: int, /) -> bytes:
        try:
            return await self._reader.readexactly(n)
        except asyncssh.Error as exc:
            raise self._lost(exc) from None

    def write(self, data: bytes, /) -> None:
        try:
            self._writer.write(data)
        except asyncssh.Error as exc:
            raise self._lost(exc) from None

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except asyncssh.Error as exc:
            raise self._lost(exc) from None

    def close(self) -> None:
        self._writer.close()


class LocalTransport:
    """This machine, for the local cluster."""

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def connected(self) -> bool:
        return True

    async def connect(self) -> None:
        return None

    async def run(self, argv: list[str], timeout: float = 30.0) -> CommandResult:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                stdin=asyncio.subprocess.DEVNULL)
        except OSError as exc:
            return CommandResult(127, "", f"{argv[0]}: {exc.strerror}")
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise NodeError(self.node.name, f"{argv[0]} did not finish within {timeout:g} s") from None
        return CommandResult(proc.returncode or 0, out.decode(errors="replace"),
                             err.decode(errors="replace"))

    async def stream(self, argv: list[str], on_line: Callable[[str], None]) -> int:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            async for raw in proc.stdout:
                on_line(raw.decode(errors="replace").rstrip("\n"))
            return await proc.wait()
        except asyncio.CancelledError:
            proc.terminate()  # the agent cleans up its temporary file on SIGTERM
            await proc.wait()
            raise

    async def put(self, local: Path, remote: str) -> None:
        await asyncio.to_thread(shutil.copyfile, local, remote)

    async def docker_url(self) -> str:
        return f"unix://{self.node.docker.socket}"

    async def open_connection(self, host: str, port: int) -> tuple[ByteReader, ByteWriter]:
        """This machine is the node: a plain socket."""
        return await asyncio.open_connection(host, port)

    async def close(self) -> None:
        return None


def transport_for(node: Node) -> Transport:
    return LocalTransport(node) if node.local else SshTransport(node)
