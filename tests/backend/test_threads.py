"""Blocking calls of every node at once: the loop's default executor is widened for the node
count before the Orchestrator connects (asyncio's own has 6 threads on a 2-core machine)."""

from __future__ import annotations

import asyncio
import threading

from sparktui.backend import threads


async def test_sixteen_nodes_calls_run_at_once_and_a_smaller_ask_keeps_them() -> None:
    assert threads.enough_for(16) == 16 * threads.PER_NODE
    assert threads.enough_for(2) == 16 * threads.PER_NODE  # never narrowed
    want = 16 * threads.PER_NODE
    lock, release = threading.Lock(), threading.Event()
    running = most = 0

    def call() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(30)
        with lock:
            running -= 1

    calls = [asyncio.create_task(asyncio.to_thread(call)) for _ in range(want)]
    for _ in range(3000):
        if most == want:
            break
        await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(*calls)
    assert most == want  # every call at once; before: 6 on 2 cores, the rest queued


async def test_a_small_cluster_gets_asyncios_most_at_least() -> None:
    assert threads.enough_for(1) == threads.FLOOR
