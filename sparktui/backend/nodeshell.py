"""How sparktui reaches a node's shell: one SSH connection (commands, TCP connections opened
on the node for health probes), or this machine directly for the local cluster. Nothing is
copied to a node as a file: the staging agent arrives on stdin. The Docker socket's tunnel over
the same connection is the Docker runtime's (``runtimes/tunnel.py``), not the shell's.

Commands are argument lists. sshd hands every command string to the node user's login shell
(``$SHELL -c``), which may be bash, dash, zsh, fish or tcsh: ``shlex.join`` quotes for POSIX
shells only (fish reads ``\\'`` inside single quotes, tcsh expands ``!`` there and refuses a
newline), so each argument list goes through ``login_shell_command``, the one place a string
for a node's shell is made. Host keys are always checked against ``known_hosts``.

Safe on a shared machine (issue 15): agent and X11 forwarding are off whatever the user's SSH
config says; which keys may be used is decided in ``sshaccess``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import asyncssh

from sparktui.backend.http import ByteReader, ByteWriter
from sparktui.backend.sshaccess import NO_LOGIN, describe_ssh_error, expand, load_identity, login_name
from sparktui.core.cluster import Node
from sparktui.core.errors import SparkError

CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
           "aes256-ctr", "aes192-ctr", "aes128-ctr")
"""AES-GCM first: asyncssh runs it as one OpenSSL call per packet, 8x cheaper than its
ChaCha20-Poly1305 (four cipher objects per packet), which held an image sync at 80 MiB/s on the
event loop (docs/benchmarks.md). Every other cipher asyncssh offers stays as a fallback."""


def login_shell_command(argv: list[str]) -> str:
    """The string a node's login shell is given for ``argv``: the same for every shell.

    ``/bin/sh`` decodes the POSIX command (``shlex.join``) from base64 and runs it in its
    place (``exec``). What the login shell parses is a fixed word plus one single-quoted word
    made only of letters, digits, space and ``"$()|/+=-``: sh, bash, dash, zsh, fish and tcsh
    all read it literally (no ``'``, ``\\``, ``!`` or newline in it), so no recipe value can
    reach the login shell's own parser. stdin is left alone (the command substitution reads
    from ``echo``), so the staging agent still gets the channel's. ``argv[0]`` must be a
    program, not a shell builtin, since it is exec'd.
    """
    script = base64.b64encode(f"exec {shlex.join(argv)}".encode()).decode("ascii")
    return f"/bin/sh -c 'eval \"$(echo {script} | base64 -d)\"'"


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


class NodeShell(Protocol):
    """Commands and connections on one node: what every check, probe and agent goes through."""

    node: Node

    @property
    def connected(self) -> bool: ...

    @property
    def shown_host(self) -> str:
        """The node's address as a sentence shows where a probe went."""
        ...

    def describe(self) -> str:
        """How the node is reached, once connected (doctor's first line)."""
        ...

    async def connect(self) -> None: ...

    async def run(self, argv: list[str], timeout: float = 30.0) -> CommandResult: ...

    async def stream(self, argv: list[str], on_line: Callable[[str], None],
                     stdin: str | None = None) -> int:
        """Run ``argv``, handing over each output line; ``stdin`` is its whole input."""
        ...

    async def open_connection(self, host: str, port: int) -> tuple[ByteReader, ByteWriter]:
        """A TCP connection to ``host:port`` as the node sees it (an ``http.Opener``); raises
        OSError when it cannot be opened."""
        ...

    async def close(self) -> None: ...


class SshShell:
    """One asyncssh connection per node, reopened on demand after it drops. What else rides on
    the connection (the Docker tunnel) registers ``on_drop``: told before the connection is
    closed, so a listener on it is closed first."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self.on_drop: list[Callable[[], Awaitable[None]]] = []

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    @property
    def shown_host(self) -> str:
        return self.node.host

    def describe(self) -> str:
        return f"connected to {self.node.host}:{self.node.ssh_port}, host key verified"

    def _login(self) -> str:
        name = login_name(self.node)
        if name is None:
            raise NodeError(self.node.name, NO_LOGIN)
        return name

    async def connect(self) -> None:
        async with self._lock:
            if self.connected:
                return
            await self._drop()
            ssh = self.node.ssh
            known_hosts = expand(ssh.known_hosts)
            if known_hosts is None or not Path(known_hosts).is_file():
                raise NodeError(self.node.name, f"known_hosts file {ssh.known_hosts} does not exist; "
                                "host keys are always verified")
            key, problem = load_identity(self.node)
            if problem is not None:
                raise NodeError(self.node.name, problem)
            try:
                self._conn = await asyncio.wait_for(
                    asyncssh.connect(
                        self.node.host, port=self.node.ssh_port, username=self._login(),
                        client_keys=[key] if key is not None else (),
                        known_hosts=known_hosts, agent_path=None if ssh.identity else (),
                        # never taken from ~/.ssh/config: a node's root could use the
                        # operator's agent or X display while sparktui is connected
                        agent_forwarding=False, x11_forwarding=False,
                        keepalive_interval=5, keepalive_count_max=3,
                        connect_timeout=ssh.connect_timeout, encryption_algs=list(CIPHERS),
                    ),
                    timeout=ssh.connect_timeout + 5,
                )
            except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError) as exc:
                raise NodeError(self.node.name, describe_ssh_error(self.node, exc)) from None

    async def _drop(self) -> None:
        for hook in self.on_drop:
            await hook()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The connection, opened first if it is not (``NodeError`` when it cannot be)."""
        if not self.connected:
            await self.connect()
        assert self._conn is not None
        return self._conn

    async def run(self, argv: list[str], timeout: float = 30.0) -> CommandResult:
        conn = await self.connection()
        try:
            res = await asyncio.wait_for(conn.run(login_shell_command(argv), check=False), timeout)
        except (OSError, asyncssh.Error) as exc:
            raise NodeError(self.node.name, describe_ssh_error(self.node, exc)) from None
        except asyncio.TimeoutError:
            raise NodeError(self.node.name, f"{argv[0]} did not finish within {timeout:g} s") from None
        rc = res.exit_status if res.exit_status is not None else 255
        return CommandResult(rc, str(res.stdout or ""), str(res.stderr or ""))

    async def stream(self, argv: list[str], on_line: Callable[[str], None],
                     stdin: str | None = None) -> int:
        """Run ``argv`` on the node, handing over each stdout line as it arrives; ``stdin``, when
        given, is written to it and followed by end of file."""
        conn = await self.connection()
        try:
            async with conn.create_process(login_shell_command(argv), stderr=asyncssh.STDOUT,
                                           input=stdin) as proc:
                async for line in proc.stdout:
                    on_line(str(line).rstrip("\n"))
                await proc.wait()
                return proc.exit_status if proc.exit_status is not None else 255
        except (OSError, asyncssh.Error) as exc:
            raise NodeError(self.node.name, describe_ssh_error(self.node, exc)) from None

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


async def _spawn(argv: list[str], **pipes: Any) -> asyncio.subprocess.Process:
    """A local command started; cancelled while it starts, the process is stopped and waited
    for, so none outlives its caller (nor closes its pipes after the event loop)."""
    spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **pipes))
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):
            started = await spawn
            with contextlib.suppress(ProcessLookupError):
                started.terminate()  # an agent cleans up its temporary file on SIGTERM
            await started.wait()
        raise


class LocalShell:
    """This machine, for a cluster whose nodes are this machine."""

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def connected(self) -> bool:
        return True

    @property
    def shown_host(self) -> str:
        return "127.0.0.1"

    def describe(self) -> str:
        return "local"

    async def connect(self) -> None:
        return None

    async def run(self, argv: list[str], timeout: float = 30.0) -> CommandResult:
        try:
            proc = await _spawn(argv, stdout=asyncio.subprocess.PIPE,
                                stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
        except OSError as exc:
            return CommandResult(127, "", f"{argv[0]}: {exc.strerror}")
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise NodeError(self.node.name, f"{argv[0]} did not finish within {timeout:g} s") from None
        except asyncio.CancelledError:  # a check given up (up refused first): nothing left behind,
            with contextlib.suppress(ProcessLookupError):  # its pipes closed on this loop
                proc.kill()
            await proc.wait()
            raise
        return CommandResult(proc.returncode or 0, out.decode(errors="replace"),
                             err.decode(errors="replace"))

    async def stream(self, argv: list[str], on_line: Callable[[str], None],
                     stdin: str | None = None) -> int:
        proc = await _spawn(argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                            stdin=asyncio.subprocess.DEVNULL if stdin is None
                            else asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        if stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin.encode())
            await proc.stdin.drain()
            proc.stdin.close()
        try:
            async for raw in proc.stdout:
                on_line(raw.decode(errors="replace").rstrip("\n"))
            return await proc.wait()
        except asyncio.CancelledError:
            proc.terminate()  # the agent cleans up its temporary file on SIGTERM
            await proc.wait()
            raise

    async def open_connection(self, host: str, port: int) -> tuple[ByteReader, ByteWriter]:
        """This machine is the node: a plain socket."""
        return await asyncio.open_connection(host, port)

    async def close(self) -> None:
        return None

