"""A rank's stdout: every line with its engine's prefix, one locked write and flush per batch."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import BinaryIO, NamedTuple


class LogStyle(NamedTuple):
    """An engine's prefix: ``lead + time.strftime(stamp) + tail`` before each line of its own,
    ``server_lead + time.strftime(server_stamp) + server_tail`` before its HTTP server's."""

    lead: str
    stamp: str
    tail: str
    server_lead: str
    server_stamp: str
    server_tail: str


class Log:
    """Writes the engine's lines (``__call__``, ``lines``) and its HTTP server's (``server``:
    what the engines' uvicorn loggers print before theirs) to stdout."""

    def __init__(self, style: LogStyle, out: BinaryIO | None = None) -> None:
        self._style = style
        self._out: BinaryIO | None = out if out is not None else getattr(sys.stdout, "buffer", None)
        self._lock = threading.Lock()
        self._closed = False

    def __call__(self, text: str) -> None:
        self.lines(text.split("\n"))

    def lines(self, lines: Sequence[str]) -> None:
        """Write a batch of lines (none may contain a newline) with one write and one flush."""
        s = self._style
        self._write(s.lead + time.strftime(s.stamp) + s.tail, lines)

    def server(self, line: str) -> None:
        """A line of the HTTP server's loggers (uvicorn's in SGLang and vLLM)."""
        s = self._style
        self._write(s.server_lead + (time.strftime(s.server_stamp) if s.server_stamp else "")
                    + s.server_tail, [line])

    def _write(self, head: str, lines: Sequence[str]) -> None:
        if not lines:
            return
        data = "".join([head + line + "\n" for line in lines]).encode("utf-8", "replace")
        with self._lock:
            if self._closed or self._out is None:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError):
                self._closed = True

    def close(self) -> None:
        """Drop every later line. Lock-free: a writer stuck on a full pipe must not block the exit."""
        self._closed = True
