"""``--demo-alloc``: a rank that takes memory in steps and holds it, as an engine loading its
weights and KV cache does, so the memory guard, the kernel's out-of-memory kill and the
restarts' wait can be shown on a machine with no GPU. Each step's pages are written, so the
kernel really gives them (a fresh buffer's untouched pages cost nothing)."""

from __future__ import annotations

import os
import re
import time

from .life import Life
from .log import Log

PAGE = 4096
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """``512M``, ``1g``, ``1GiB``, ``4096``: bytes (binary units). ValueError otherwise."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size such as 512M or 1G")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def hold(log: Log, life: Life, total: int, step: int, every: float) -> None:
    """Allocate ``step`` bytes every ``every`` seconds up to ``total``, then hold them until the
    rank exits (the buffers live in this thread's frame)."""
    held: list[bytearray] = []
    size = 0
    while size < total and not life.exiting:
        chunk = bytearray(min(step, total - size))
        chunk[::PAGE] = b"\x01" * len(range(0, len(chunk), PAGE))
        held.append(chunk)
        size += len(chunk)
        log(f"DEMO memory: holding {mib(size)} of {mib(total)} (step {len(held)})")
        time.sleep(every)
    while not life.exiting:
        time.sleep(0.2)


def first_time(flag: str | None, log: Log) -> bool:
    """``--demo-alloc-once FILE``: True (and FILE made) only where FILE is absent, so a
    restarted rank does not take the memory again; no FILE: always True."""
    if flag is None:
        return True
    try:
        os.close(os.open(flag, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        log(f"DEMO memory: {flag} exists: taking no memory this time")
        return False
    except OSError as exc:
        log(f"DEMO memory: {flag} cannot be made ({exc.strerror}): taking no memory")
        return False
    return True
