"""A Docker log stream's lines, from the thread that reads it to the event loop, in bounded
memory: lines cut as the local shim cuts them, and a hand-off that holds a few MiB at most.

Before, the pump joined bytes to bytes until a newline (a 32 MiB line without one took 46 s,
quadratic) and queued whatever it read without limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Iterable

from sparktui.agents.local_shim import MAX_LINE_BYTES, LineCutter

HELD_CHARS = 4 * 1024 * 1024
"""Text the reader thread may have handed over before the loop takes it; past this it waits."""
BATCH_LINES = 2000
BATCH_CHARS = 1024 * 1024
"""At most this much text in one batch: each is written, checked and shown in one turn of the
event loop."""
WAIT_S = 0.5  # how often a waiting reader looks whether its consumer went away


def split_ts(ts: str) -> tuple[int, int, str]:
    """``2026-11-29T14:44:15.1234Z`` -> (sortable seconds key, nanoseconds, whole-second part).

    Docker trims trailing zeros from its nanosecond timestamps, so strings do not compare."""
    base, _, frac = ts.rstrip("Z").partition(".")
    nanos = int((frac + "000000000")[:9]) if frac else 0
    digits = "".join(ch for ch in base if ch.isdigit())
    return int(digits or 0), nanos, base


def normalize_ts(ts: str) -> str:
    _, nanos, base = split_ts(ts)
    return f"{base}.{nanos:09d}Z"


class FrameLines:
    """Docker's log frames -> ``(timestamp, text)`` lines (timestamps normalised).

    With ``timestamps=True`` each frame the SDK yields is one message, ``<timestamp> <text>``.
    Docker cuts a line into messages of 16 KiB (all with the line's timestamp, only the last
    with the newline), so the text is joined across frames without their timestamps (joining
    the raw stream put a timestamp every 16 KiB inside the line) and cut again by the shim's
    ``LineCutter``. A line keeps the timestamp of its first frame, so resuming from a cursor
    inside a cut line (``since`` reads its frames again) gives the same pieces to skip."""

    def __init__(self, cap: int = MAX_LINE_BYTES, whole: Iterable[str] = ()) -> None:
        self.cutter = LineCutter(cap, (v.encode("utf-8", "surrogateescape") for v in whole))
        self.ts = ""
        self.open = False  # the last frame ended inside a line

    def feed(self, frame: bytes) -> list[tuple[str, str]]:
        ts, _, text = frame.partition(b" ")
        if not text:
            return []
        if not self.open:
            self.ts = normalize_ts(ts.decode("ascii", "replace"))
            if (text.endswith(b"\n") and len(text) <= self.cutter.cap
                    and text.count(b"\n") == 1):  # most frames: one whole line, as it is
                line = text[:-2] if text.endswith(b"\r\n") else text[:-1]
                return [(self.ts, line.decode("utf-8", "replace"))]
        self.open = not text.endswith(b"\n")
        return [(self.ts, line) for line in self.cutter.feed(text)]

    def close(self) -> list[tuple[str, str]]:
        return [(self.ts, line) for line in self.cutter.close()]


class Handoff:
    """Lines from a reader thread to the event loop. The thread waits while ``HELD_CHARS`` of
    text are held (backpressure reaches the Docker stream, and through it the container's own
    log); the loop never waits for the thread: it takes what is there or awaits a wake-up."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int = HELD_CHARS) -> None:
        self._loop = loop
        self._limit = limit
        self._room = threading.Condition()
        self._lines: deque[tuple[str, str]] = deque()
        self._held = 0
        self._done = False
        self._error: BaseException | None = None
        self._gone = False  # the consumer left: the thread stops
        self._ready = asyncio.Event()

    # the reader thread's side
    def put(self, lines: list[tuple[str, str]]) -> bool:
        """Hand ``lines`` over, waiting for room; False once the consumer is gone."""
        if not lines:
            return not self._gone
        size = sum(len(text) for _, text in lines)
        with self._room:
            while self._held >= self._limit and not self._gone:
                self._room.wait(WAIT_S)
            if self._gone:
                return False
            wake = not self._lines
            self._lines.extend(lines)
            self._held += size
        if wake:
            self._wake()
        return True

    def finish(self, error: BaseException | None = None) -> None:
        """No more lines (``error``: why the stream broke, raised in the loop)."""
        with self._room:
            self._done, self._error = True, error
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            self._loop.call_soon_threadsafe(self._ready.set)

    # the event loop's side
    async def take(self) -> list[tuple[str, str]] | None:
        """The next batch (at most ``BATCH_LINES`` lines and ``BATCH_CHARS`` of text, one line
        at least), or None at the end; raises what broke the stream."""
        while True:
            with self._room:
                if self._lines:
                    return self._batch()
                if self._done:
                    if self._error is not None:
                        raise self._error
                    return None
                self._ready.clear()  # under the lock: a put after this wakes the loop
            await self._ready.wait()

    def _batch(self) -> list[tuple[str, str]]:
        lines, size = self._lines, 0
        batch: list[tuple[str, str]] = []
        while lines and len(batch) < BATCH_LINES and (size < BATCH_CHARS or not batch):
            line = lines.popleft()
            batch.append(line)
            size += len(line[1])
        self._held -= size
        self._room.notify()
        return batch

    def close(self) -> None:
        """The consumer leaves: a waiting thread returns from ``put`` with False."""
        with self._room:
            self._gone = True
            self._room.notify_all()
