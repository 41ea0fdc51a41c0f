"""One ``docker save`` stream into several ``docker load`` uploads at once (``imagesync`` decides
what goes where).

The save stream is read in a thread; each chunk goes to every target's small bounded queue, and
each target's upload (a chunked ``POST /images/load``, the docker SDK's ``load_image`` over an
iterable) runs in a thread of its own, fed from its queue. Memory stays at a few chunks per
target, nothing touches this machine's disk, and the slowest target sets the pace. A target that
fails leaves the fan-out without holding the others up. The event loop only turns the threads'
byte counters into ``ImageSyncProgress`` events; the SSH tunnels the SDK talks through are served
by that loop, so it must never wait on a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Literal

import docker
import docker.errors

from sparktui.backend.events import Event, ImageSyncProgress
from sparktui.core.errors import sentence

CHUNK = 1 << 20
"""Bytes per read of the save stream (and per chunk of each upload)."""
QUEUE_CHUNKS = 8
"""Chunks a target may lag behind the save stream before the stream waits for it."""
PROGRESS_S = 0.25
RATE_WINDOW_S = 3.0


class _Stopped(Exception):
    """The sync was called off (its task cancelled): every thread ends at its next chunk."""


class _SourceBroke(Exception):
    """The save stream ended in an error; every upload is cut short with it."""


_END = object()


class _Tee:
    """One save stream to several uploads. Each target has a bounded queue; a chunk goes into
    every queue of a target still reading. A target that fails leaves (its queue is emptied and
    no longer fed), so it never holds the others up."""

    def __init__(self, names: list[str]) -> None:
        self.queues: dict[str, queue.Queue[object]] = {n: queue.Queue(QUEUE_CHUNKS) for n in names}
        self.gone: set[str] = set()
        self.stop = threading.Event()
        self.sent = dict.fromkeys(names, 0)  # bytes each upload has taken, read by the loop
        self.ended: dict[str, float] = {}  # when each upload took its last byte

    def put(self, item: object) -> bool:
        """Hand ``item`` to every live target (waiting for room); False when none is left."""
        live = False
        for name, q in self.queues.items():
            while name not in self.gone:
                if self.stop.is_set():
                    raise _Stopped
                try:
                    q.put(item, timeout=0.2)
                    live = True
                    break
                except queue.Full:
                    continue
        return live

    def leave(self, name: str) -> None:
        self.gone.add(name)
        q = self.queues[name]
        with contextlib.suppress(queue.Empty):
            while True:
                q.get_nowait()

    def chunks(self, name: str) -> Iterator[bytes]:
        """The upload body of one target: the save stream's chunks, as they come."""
        q = self.queues[name]
        while True:
            try:
                item = q.get(timeout=0.2)
            except queue.Empty:
                if self.stop.is_set():
                    raise _Stopped from None
                continue
            if item is _END:
                self.ended[name] = time.monotonic()
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, bytes)
            self.sent[name] += len(item)
            yield item


def _save(api: docker.APIClient, image: str, tee: _Tee) -> None:
    """Read the save stream into the tee (in a thread)."""
    try:
        for chunk in api.get_image(image, chunk_size=CHUNK):
            if not tee.put(chunk):
                return  # every target failed: stop reading
        tee.put(_END)
    except _Stopped:
        return
    except Exception as exc:
        with contextlib.suppress(_Stopped):
            tee.put(_SourceBroke(f"the save stream from the source broke: {sentence(exc)}"))


def _load(api: docker.APIClient, name: str, tee: _Tee) -> str | None:
    """Upload into one target (in a thread); its engine's error, or None."""
    try:
        answer = api.load_image(tee.chunks(name), quiet=True)
        for msg in [answer] if isinstance(answer, dict) else answer or []:  # one JSON or a stream
            if isinstance(msg, dict) and msg.get("error"):
                return f"docker load on {name}: {msg['error']}"
        return None
    except (_Stopped, _SourceBroke) as exc:
        return str(exc) or "the sync was called off"
    except docker.errors.APIError as exc:
        return f"docker load on {name}: {exc.explanation or exc}"
    except Exception as exc:
        return f"docker load on {name}: {sentence(exc)}"
    finally:
        tee.leave(name)


class _Rates:
    """Bytes per second over the last few seconds, per target."""

    def __init__(self) -> None:
        self.samples: dict[str, deque[tuple[float, int]]] = {}

    def rate(self, name: str, now: float, done: int) -> float:
        window = self.samples.setdefault(name, deque())
        window.append((now, done))
        while len(window) > 2 and now - window[0][0] > RATE_WINDOW_S:
            window.popleft()
        t0, b0 = window[0]
        return (done - b0) / (now - t0) if now > t0 else 0.0


async def copy_image(image: str, source: docker.APIClient, source_name: str, size: int,
                     targets: dict[str, docker.APIClient],
                     emit: Callable[[Event], None]) -> dict[str, tuple[str | None, int, float]]:
    """Stream the image from ``source`` into every target at once. Per target: (error or None,
    bytes sent, seconds until its engine answered)."""
    names = list(targets)
    tee = _Tee(names)
    started = time.monotonic()
    finished: dict[str, float] = {}

    async def load(name: str) -> str | None:
        try:
            return await asyncio.to_thread(_load, targets[name], name, tee)
        finally:
            finished[name] = time.monotonic()

    saver = asyncio.ensure_future(asyncio.to_thread(_save, source, image, tee))
    loads = {name: asyncio.ensure_future(load(name)) for name in names}
    rates = _Rates()
    said: dict[str, tuple[str, int]] = {}

    def report() -> None:
        now = time.monotonic()
        for name in names:
            if name in finished:
                continue
            done = tee.sent[name]
            phase: Literal["sending", "loading"] = "loading" if name in tee.ended else "sending"
            if said.get(name) == (phase, done) and phase == "loading":
                continue
            said[name] = (phase, done)
            total = max(size, done)
            rate = rates.rate(name, now, done)
            eta = (total - done) / rate if rate > 0 and phase == "sending" else None
            emit(ImageSyncProgress(name, image, source_name, phase, done, total, rate, eta))

    try:
        report()  # every target's first line: its copy has begun
        pending = set(loads.values())
        while pending:
            _done, pending = await asyncio.wait(pending, timeout=PROGRESS_S)
            report()
        errors = {name: task.result() for name, task in loads.items()}
    finally:
        tee.stop.set()  # called off (cancelled) or over: no thread waits for another
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(saver), 5)
    return {name: (errors[name], tee.sent[name], finished[name] - started) for name in names}
