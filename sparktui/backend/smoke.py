"""One real request after /health turns 200: a streamed chat completion to the head, with time
to first token and decode speed (the operator's `smoke` verb)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from sparktui.backend.http import Opener, direct, stream_lines
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
