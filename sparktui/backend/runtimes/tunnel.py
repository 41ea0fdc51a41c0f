"""The node's Docker socket, forwarded over the node shell's SSH connection.

The node's Docker engine is root on the node, so the socket is forwarded to a unix socket inside
a folder only this user can enter (``sockdir``), never to a TCP port that every local user could
reach (issue 15). The tunnel rides on the shell's connection: when the shell reconnects it
closes the listener first (``SshShell.on_drop``), and the next ``url()`` forwards again.
"""

from __future__ import annotations

import asyncio
import os

import asyncssh

from sparktui.backend.nodeshell import NodeError, SshShell
from sparktui.backend.sockdir import SOCKET_NAME, private_folder, remove_folder


class DockerTunnel:
    """``unix://`` URL of the node's Docker socket, reached through ``shell``'s connection."""

    def __init__(self, shell: SshShell) -> None:
        self.shell = shell
        self._listener: asyncssh.SSHListener | None = None
        self._folder: str | None = None
        self._lock = asyncio.Lock()
        shell.on_drop.append(self._drop)

    async def _drop(self) -> None:
        """The connection is going: its listener goes with it (never awaits the tunnel's lock:
        ``url`` may hold it while it waits for the shell to reconnect)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    async def url(self) -> str:
        node = self.shell.node
        conn = await self.shell.connection()
        async with self._lock:
            try:
                if self._folder is None or not os.path.isdir(self._folder):
                    self._folder = private_folder()  # first use, or removed while it reconnected
                    await self._drop()
                path = os.path.join(self._folder, SOCKET_NAME)
                if self._listener is None:
                    # a socket left by the listener before a reconnect is replaced
                    self._listener = await conn.forward_local_path(path, node.docker.socket)
            except (OSError, asyncssh.Error) as exc:
                raise NodeError(node.name, f"cannot forward the Docker socket "
                                f"{node.docker.socket}: {exc}") from None
            return f"unix://{path}"

    async def close(self) -> None:
        """The listener closed and its folder removed (the shell closes the connection)."""
        await self._drop()
        if self._folder is not None:
            remove_folder(self._folder)
            self._folder = None
