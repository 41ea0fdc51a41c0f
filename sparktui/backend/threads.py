"""Enough threads for every node's blocking calls at once.

The Docker SDK, file reads and the local shim's calls run in asyncio's default executor
(``asyncio.to_thread``), which has ``min(32, cores + 4)`` threads: 6 on a 2-core machine. Most
of those calls wait on a node (a container create over its SSH tunnel), so on a cluster of
more nodes than threads they queued behind each other: at 16 nodes, one container's create and
start took a median of 2.1 s against 0.74 s at 4 (``bench/launch.py --nodes 4,16``). Before it
connects, the Orchestrator asks for ``PER_NODE`` threads a node on the running loop; a
``ThreadPoolExecutor`` starts its threads only as they are needed.
"""

from __future__ import annotations

import asyncio
import weakref
from concurrent.futures import ThreadPoolExecutor

PER_NODE = 4
"""Blocking calls a node may have at once: a create or start, a log stream's read, an inspect
and a file read beside them."""
FLOOR = 32
"""Never fewer than asyncio's own most."""

_given: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = weakref.WeakKeyDictionary()


def enough_for(nodes: int) -> int:
    """The running loop's default executor, with room for ``nodes`` nodes' calls at once
    (replaced only when it is smaller); returns its size."""
    loop = asyncio.get_running_loop()
    want = max(FLOOR, PER_NODE * nodes)
    have = _given.get(loop, 0)
    if have < want:
        loop.set_default_executor(ThreadPoolExecutor(max_workers=want,
                                                     thread_name_prefix="sparktui"))
        _given[loop] = have = want
    return have
