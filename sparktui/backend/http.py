"""A minimal asyncio HTTP/1.1 client for health probes and smoke requests (no extra dependency,
never blocks the loop).

Requests travel over whatever byte stream an ``Opener`` gives: a socket from this machine
(``direct``), or a TCP connection opened on a node through its SSH connection
(``NodeShell.open_connection``), so an engine is reached as its own node sees it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol


class ByteReader(Protocol):
    """What a request reads from (``asyncio.StreamReader`` and the SSH shell's channel)."""

    async def read(self, n: int = -1, /) -> bytes: ...

    async def readuntil(self, separator: bytes = b"\n", /) -> bytes: ...

    async def readexactly(self, n: int, /) -> bytes: ...


class ByteWriter(Protocol):
    """What a request writes to (``asyncio.StreamWriter`` and the SSH shell's channel)."""

    def write(self, data: bytes, /) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


Opener = Callable[[str, int], Awaitable[tuple[ByteReader, ByteWriter]]]
"""Opens a TCP connection to ``(host, port)``; raises OSError when it cannot."""


async def direct(host: str, port: int) -> tuple[ByteReader, ByteWriter]:
    """A connection from this machine (the local cluster, and the default)."""
    return await asyncio.open_connection(host, port)


@dataclass(frozen=True)
class HttpResult:
    status: int
    body: bytes

    def json(self) -> object:
        return json.loads(self.body or b"null")


async def request(host: str, port: int, path: str, *, method: str = "GET",
                  body: bytes | None = None, timeout: float = 3.0,
                  opener: Opener = direct) -> HttpResult:
    """One request with ``Connection: close`` over a connection from ``opener``; raises OSError
    or TimeoutError on failure (the connection included: ``timeout`` bounds it all)."""

    async def go() -> HttpResult:
        reader, writer = await opener(host, port)
        try:
            head = (f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
                    "Accept: application/json\r\n")
            if body is not None:
                head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            writer.write(head.encode() + b"\r\n" + (body or b""))
            await writer.drain()
            raw = await reader.read()
        finally:
            writer.close()
        header, _, payload = raw.partition(b"\r\n\r\n")
        status_line = header.split(b"\r\n", 1)[0].split()
        if len(status_line) < 2 or not status_line[1].isdigit():
            raise OSError(f"not an HTTP answer from {host}:{port}")
        if b"transfer-encoding: chunked" in header.lower():
            payload = _dechunk(payload)
        return HttpResult(int(status_line[1]), payload)

    return await asyncio.wait_for(go(), timeout)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            break
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return bytes(out)


async def stream_lines(host: str, port: int, path: str, body: bytes, timeout: float = 60.0,
                       opener: Opener = direct) -> AsyncIterator[tuple[int, bytes]]:
    """POST and yield ``(status, line)`` for each line of the body as it arrives (SSE);
    decodes chunked transfer encoding incrementally."""
    reader, writer = await asyncio.wait_for(opener(host, port), timeout)
    try:
        head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
                f"Accept: text/event-stream\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")
        writer.write(head.encode() + body)
        await writer.drain()
        raw_head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        status_line = raw_head.split(b"\r\n", 1)[0].split()
        if len(status_line) < 2 or not status_line[1].isdigit():
            raise OSError(f"not an HTTP answer from {host}:{port}")
        status = int(status_line[1])
        chunked = b"transfer-encoding: chunked" in raw_head.lower()
        pending = b""

        async def pieces() -> AsyncIterator[bytes]:
            if not chunked:
                while data := await asyncio.wait_for(reader.read(65536), timeout):
                    yield data
                return
            while True:
                size_line = await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    return
                data = await asyncio.wait_for(reader.readexactly(size + 2), timeout)
                yield data[:-2]

        async for piece in pieces():
            pending += piece
            while b"\n" in pending:
                line, _, pending = pending.partition(b"\n")
                yield status, line.rstrip(b"\r")
        if pending:
            yield status, pending
    finally:
        writer.close()
