"""One real request after /health turns 200: a streamed chat completion to the head, with time
to first token and decode speed (the operator's `smoke` verb); or N of them, C at once, and
what they did together (``smoke --n N --concurrency C``: load the engine can be watched under)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from sparktui.backend.http import Opener, direct, stream_lines
from sparktui.backend.together import together
from sparktui.core.errors import SparkError

PROMPT = "In one sentence: what does a tensor-parallel inference cluster do?"


@dataclass(frozen=True)
class SmokeResult:
    model: str
    text: str
    tokens: int
    ttft_s: float
    decode_tps: float
    total_s: float

    def sentence(self) -> str:
        return (f"{self.model}: {self.tokens} tokens, first after {self.ttft_s * 1000:.0f} ms, "
                f"decode {self.decode_tps:.1f} tok/s ({self.total_s:.2f} s in all)")


async def smoke(host: str, port: int, model: str, *, max_tokens: int = 64,
                timeout: float = 120.0, opener: Opener = direct, shown_host: str | None = None
                ) -> SmokeResult:
    """Raises ``SparkError`` with one sentence when the endpoint is dead or answers nothing.
    ``opener`` connects (through the node's SSH connection for a remote head); ``shown_host``
    names the head in messages."""
    body = json.dumps({"model": model, "stream": True, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": PROMPT}],
                       "stream_options": {"include_usage": True}}).encode()
    url = f"http://{shown_host or host}:{port}/v1/chat/completions"
    start = time.monotonic()
    first: float | None = None
    last = start
    pieces: list[str] = []
    usage_tokens: int | None = None
    try:
        async for status, line in stream_lines(host, port, "/v1/chat/completions", body, timeout,
                                                 opener=opener):
            if status != 200:
                raise SparkError(f"smoke: {url} answered HTTP {status}: "
                                 f"{line.decode(errors='replace')[:200]}")
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            event = json.loads(payload)
            usage = event.get("usage") or {}
            if usage.get("completion_tokens") is not None:
                usage_tokens = int(usage["completion_tokens"])
            for choice in event.get("choices", []):
                text = (choice.get("delta") or {}).get("content") or ""
                if text:
                    now = time.monotonic()
                    first = first if first is not None else now
                    last = now
                    pieces.append(text)
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
        if isinstance(exc, ConnectionRefusedError):
            reason = "connection refused: is the head running?"
        elif isinstance(exc, asyncio.TimeoutError):
            reason = f"no answer within {timeout:g} s"
        elif isinstance(exc, asyncio.IncompleteReadError):
            reason = "the connection closed mid-answer"
        else:
            reason = str(exc.strerror or exc) if isinstance(exc, OSError) else str(exc)
        raise SparkError(f"smoke: cannot reach {url} ({reason})") from None
    except ValueError as exc:
        raise SparkError(f"smoke: {url} sent something that is not an OpenAI stream: {exc}") from None
    if first is None:
        raise SparkError(f"smoke: {url} answered, but no token arrived")
    tokens = usage_tokens or len(pieces)
    decode = (tokens - 1) / (last - first) if tokens > 1 and last > first else 0.0
    return SmokeResult(model, "".join(pieces), tokens, first - start, decode, time.monotonic() - start)


SmokeOutcome = SmokeResult | SparkError
"""One request of many: its result, or the error that says why it failed."""


async def smoke_many(one: Callable[[], Awaitable[SmokeResult]], n: int, concurrency: int = 1,
                     on_each: Callable[[int, SmokeOutcome], None] | None = None) -> list[SmokeOutcome]:
    """``n`` requests, ``concurrency`` at once (the next sent as one ends); their outcomes in
    the order sent. One that fails does not stop the others. ``on_each(i, outcome)`` as each
    ends (``i`` from 0, in the order they end)."""
    outcomes: list[SmokeOutcome | None] = [None] * n
    sent = 0

    async def worker() -> None:
        nonlocal sent
        while sent < n:
            i, sent = sent, sent + 1
            outcome: SmokeOutcome
            try:
                outcome = await one()
            except SparkError as exc:
                outcome = exc
            outcomes[i] = outcome
            if on_each is not None:
                on_each(i, outcome)

    await together(*(worker() for _ in range(max(1, min(n, concurrency)))))
    return [o for o in outcomes if o is not None]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1), linear between the closest two (None: no values)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class SmokeSummary:
    requests: int
    failed: int
    tokens: int
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    decode_p50_tps: float | None
    wall_s: float

    @classmethod
    def of(cls, outcomes: Sequence[SmokeOutcome], wall_s: float) -> SmokeSummary:
        done = [o for o in outcomes if isinstance(o, SmokeResult)]
        ttfts = [r.ttft_s for r in done]
        return cls(len(outcomes), len(outcomes) - len(done), sum(r.tokens for r in done),
                   percentile(ttfts, 0.5), percentile(ttfts, 0.95),
                   percentile([r.decode_tps for r in done if r.decode_tps > 0], 0.5), wall_s)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.requests > 0

    def sentence(self) -> str:
        """``3 requests, p50 first token 25 ms, p95 first token 31 ms, decode p50 49.8 tok/s,
        114 tokens in 1.62 s``; the failed ones first when there are."""
        head = (f"{self.requests} request{'s' if self.requests != 1 else ''}" if not self.failed
                else f"{self.failed} of {self.requests} requests failed")
        parts = [head]
        if self.ttft_p50_s is not None and self.ttft_p95_s is not None:
            parts += [f"p50 first token {self.ttft_p50_s * 1000:.0f} ms",
                      f"p95 first token {self.ttft_p95_s * 1000:.0f} ms"]
        if self.decode_p50_tps is not None:
            parts.append(f"decode p50 {self.decode_p50_tps:.1f} tok/s")
        parts.append(f"{self.tokens} tokens in {self.wall_s:.2f} s")
        return ", ".join(parts)
