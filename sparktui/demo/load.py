"""What rank 0 is serving, as an engine's scheduler counts it: the requests running (at most
``max_running`` at once) and those queued behind them, the tokens in flight, the token counters
since the rank started and the latency histograms. ``/metrics`` reads it, the batch lines too.

One lock (a condition: a queued request waits on it for its turn), as the HTTP server answers
each request in a thread of its own.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

THROUGHPUT_WINDOW = 5.0
"""Seconds the generation throughput is counted over (SGLang's gauge is the last batches')."""
SHARED_PREFIX = 4
"""Prompt tokens every request shares with the ones before it (the chat template's): the
prefix cache holds them from the second request on."""


class HistogramReading(NamedTuple):
    bounds: tuple[float, ...]  # upper bounds, ascending, without +Inf
    cumulative: tuple[int, ...]  # observations <= each bound, then the count (+Inf)
    total: float  # the sum of the observations
    observations: int  # the count (not ``count``: a tuple has that method)


class Histogram:
    """Observations counted into fixed buckets (the caller holds the lock)."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(sorted(bounds))
        self._counts = [0] * (len(self.bounds) + 1)  # the last: above every bound
        self._sum = 0.0

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self.bounds, value)] += 1
        self._sum += value

    def reading(self) -> HistogramReading:
        cumulative: list[int] = []
        running = 0
        for n in self._counts:
            running += n
            cumulative.append(running)
        return HistogramReading(self.bounds, tuple(cumulative), self._sum, running)


class Ticket:
    """One request's place: queued, then running, then gone."""

    __slots__ = ("arrived", "cached", "generated", "last", "prompt", "running")

    def __init__(self, prompt: int, arrived: float) -> None:
        self.prompt = prompt
        self.arrived = arrived
        self.cached = 0
        self.generated = 0
        self.last: float | None = None  # when its last token came (None: none yet)
        self.running = False


class Batch(NamedTuple):
    """The scheduler's numbers of the moment (the batch lines print them)."""

    running: int
    queued: int
    used_tokens: int  # prompt and generated tokens of the running requests
    throughput: float  # generated tokens a second over the last THROUGHPUT_WINDOW


class Reading(NamedTuple):
    """Everything ``/metrics`` shows, read at once."""

    batch: Batch
    prompt_tokens: int  # counters since the rank started
    generation_tokens: int
    cached_tokens: int
    requests: int  # finished
    histograms: dict[str, HistogramReading]


class Load:
    """The requests in flight and what they did. ``buckets``: the histograms to keep, by name
    ("ttft": arrival to first token, "tpot": between two tokens of a request, "e2e": arrival
    to the last token), each with its upper bounds (the personality's engine's)."""

    def __init__(self, max_running: int, buckets: Mapping[str, Sequence[float]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_running = max_running
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[Ticket] = deque()
        self._running = 0
        self._used = 0
        self._prompt = 0
        self._generated = 0
        self._cached = 0
        self._finished = 0
        self._started = clock()
        self._recent: deque[float] = deque()  # when each token of the last window came
        self._hist = {name: Histogram(bounds) for name, bounds in buckets.items()}

    def arrive(self, prompt_tokens: int) -> Ticket:
        """A request came: it queues."""
        with self._cond:
            ticket = Ticket(prompt_tokens, self._clock())
            self._queue.append(ticket)
            return ticket

    def admit(self, ticket: Ticket) -> Batch:
        """Wait for ``ticket``'s turn (first in the queue and a free place), then it runs:
        its prompt is prefilled (counted, the shared prefix from the cache)."""
        with self._cond:
            while self._queue[0] is not ticket or self._running >= self.max_running:
                self._cond.wait()
            self._queue.popleft()
            ticket.running = True
            self._running += 1
            ticket.cached = min(ticket.prompt, SHARED_PREFIX) if self._prompt else 0
            self._prompt += ticket.prompt
            self._cached += ticket.cached
            self._used += ticket.prompt
            self._cond.notify_all()  # the next in the queue may have a place too
            return self._batch()

    def token(self, ticket: Ticket) -> None:
        """One token of ``ticket`` generated."""
        with self._cond:
            now = self._clock()
            self._generated += 1
            ticket.generated += 1
            self._used += 1
            self._recent.append(now)
            self._prune(now)
            if ticket.last is None:
                self._observe("ttft", now - ticket.arrived)
            else:
                self._observe("tpot", now - ticket.last)
            ticket.last = now

    def finish(self, ticket: Ticket) -> Batch:
        """``ticket`` is done (answered, or given up: its client went away, the rank exits);
        the batch as it was with it."""
        with self._cond:
            batch = self._batch()
            if ticket.running:
                ticket.running = False
                self._running -= 1
                self._used -= ticket.prompt + ticket.generated
                if ticket.last is not None:
                    self._observe("e2e", ticket.last - ticket.arrived)
                    self._finished += 1
            elif ticket in self._queue:
                self._queue.remove(ticket)
            self._cond.notify_all()
            return batch

    def batch(self) -> Batch:
        with self._cond:
            return self._batch()

    def reading(self) -> Reading:
        with self._cond:
            return Reading(self._batch(), self._prompt, self._generated, self._cached, self._finished,
                           {name: h.reading() for name, h in self._hist.items()})

    # -- with the lock held -----------------------------------------------------------------------
    def _observe(self, name: str, value: float) -> None:
        hist = self._hist.get(name)
        if hist is not None:
            hist.observe(value)

    def _prune(self, now: float) -> None:
        while self._recent and self._recent[0] <= now - THROUGHPUT_WINDOW:
            self._recent.popleft()

    def _batch(self) -> Batch:
        now = self._clock()
        self._prune(now)
        window = min(THROUGHPUT_WINDOW, max(1.0, now - self._started))
        return Batch(self._running, len(self._queue), self._used, len(self._recent) / window)
