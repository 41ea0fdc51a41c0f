"""Where a launch spends its time: a timing log, off unless asked for.

With ``SPARKTUI_TIMING=FILE`` in the environment, each ``mark(what)`` appends one line
``<time.monotonic()> <what>`` to FILE. The monotonic clock is the machine's, so another process
(``bench/launch.py``, which started the CLI) can put the marks on its own time line: process
start and imports, SSH connects, the Docker clients, each container's create and start, its
first log line, the ready lines, the probes and the moment ready is reported. Off, a mark is
one test of a module global.
"""

from __future__ import annotations

import os
import time

ENV = "SPARKTUI_TIMING"
_FILE = os.environ.get(ENV) or None


def enabled() -> bool:
    return _FILE is not None


def mark(what: str) -> None:
    """One line in the timing log (when there is one): a file opened and appended to each time,
    so several processes may share it and nothing is lost when one is killed."""
    if _FILE is None:
        return
    with open(_FILE, "a", encoding="utf-8") as f:
        f.write(f"{time.monotonic():.6f} {what}\n")
