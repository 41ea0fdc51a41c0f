"""What a ready rank prints unprompted: ticks (``--demo-tick``) and a flood of realistic
decode-loop lines (``--demo-flood``), each in a thread until the rank exits."""

from __future__ import annotations

import time

from .life import Life
from .lines import KV_TOKENS, TICK_LINE
from .log import Log


def flood_lines(start: int, count: int) -> list[str]:
    """``count`` realistic decode-loop lines, numbered from ``start`` (deterministic, cheap)."""
    out: list[str] = []
    for i in range(start, start + count):
        running = 1 + (i // 7) % 16
        tokens = 1000 + (i * 37) % 60000
        if i % 97 == 96:
            out.append(
                f"Prefill batch. #new-seq: 1, #new-token: {64 + i % 900}, #cached-token: {i % 512}, "
                f"token usage: {tokens / KV_TOKENS:.2f}, #running-req: {running}, #queue-req: 0"
            )
        elif i % 251 == 250:
            client = f"10.0.0.{1 + i % 250}:{40000 + i % 20000}"
            out.append(f'INFO:     {client} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        elif i % 1009 == 1008:
            out.append(f"Cache hit rate: {0.5 + (i % 40) / 100:.2f}, #evicted-token: {i % 4096}")
        else:
            out.append(
                f"Decode batch. #running-req: {running}, #token: {tokens}, "
                f"token usage: {tokens / KV_TOKENS:.2f}, "
                f"gen throughput (token/s): {60 + (i * 13) % 4000 / 100:.2f}, #queue-req: 0"
            )
    return out



def tick(log: Log, life: Life, period: float) -> None:
    """``demo tick <n>`` every ``period`` seconds, n = 1, 2, 3, ... (on time, not drifting)."""
    start = time.monotonic()
    n = 0
    while not life.exiting:
        n += 1
        delay = start + n * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        log(TICK_LINE.format(n=n))


def flood(log: Log, life: Life, rate: float) -> None:
    """``rate`` decode-loop lines a second, in batches (at most one second's worth a write)."""
    cap = max(1, int(rate))  # never more than one second's worth in one write
    start = time.monotonic()
    written = 0
    while not life.exiting:
        elapsed = time.monotonic() - start
        due = int(elapsed * rate)
        if due - written > cap:
            written = due - cap
        if due > written:
            log.lines(flood_lines(written, due - written))
            written = due
        next_due = (written + 1) / rate - (time.monotonic() - start)
        time.sleep(min(1.0, max(0.05, next_due)))
