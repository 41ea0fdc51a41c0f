"""A node's memory as the kernel tells it: ``MemAvailable`` and, where the kernel has it, the
pressure stall information of ``/proc/pressure/memory``.

On a DGX Spark the GPU and CPU share the box's pool, so ``MemAvailable`` is what decides
whether a boot survives: the fit check, the memory guard and the restarts' wait all read this
one sample. It is one fixed script of shell builtins (no fork but the loop's ``sleep``), so the
guard can run it every second on every node. It stops reading at ``MemAvailable`` (the third
line): ``read`` takes a byte per system call, and the other fifty lines were a quarter of the
loop's cost (bench/memguard.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparktui.core.telemetry import parse_meminfo

MEM_END = "---sparktui-mem---"
NO_PSI = "no-psi"

MEMORY_BODY = (
    "n='\n'; o=; while IFS= read -r l; do case $l in MemTotal:*) o=${o}$l$n;; "
    "MemAvailable:*) o=${o}$l$n; break;; esac; done < /proc/meminfo; "
    "if [ -r /proc/pressure/memory ]; then while IFS= read -r l; do o=\"${o}psi $l$n\"; done "
    "< /proc/pressure/memory; else o=${o}" + NO_PSI + "$n; fi"
)
"""The reading gathered in ``$o``, written at once (``MEMORY_SCRIPT``, the loop): a write per
line was an SSH packet each."""
MEMORY_SCRIPT = MEMORY_BODY + "; printf %s \"$o\""

_PSI = re.compile(r"^psi (some|full) avg10=([0-9.]+) avg60=([0-9.]+)")


@dataclass(frozen=True)
class NodeMemory:
    """One reading: bytes, and PSI's share of the last 10 s that some (or every) task waited
    for memory, in percent (None where the kernel has no PSI)."""

    total: int
    available: int
    psi_some10: float | None = None
    psi_full10: float | None = None

    def to_json(self) -> dict[str, object]:
        return {"total": self.total, "available": self.available,
                "psi_some10": self.psi_some10, "psi_full10": self.psi_full10}


def memory_argv() -> list[str]:
    return ["sh", "-c", MEMORY_SCRIPT, "sparktui-memory"]


def memory_loop_argv(interval: float) -> list[str]:
    """The same reading every ``interval`` seconds from one long-lived command, each ended by
    ``MEM_END``: no process or channel per reading. The ``sleep`` holds no end of the output:
    when the loop is ended its output closes at once, not a ``sleep`` later."""
    loop = (f"while :; do {{ {MEMORY_BODY}; }}; printf '%s%s\\n' \"$o\" {MEM_END}; "
            "sleep \"$0\" </dev/null >/dev/null 2>&1; done")
    return ["sh", "-c", loop, f"{interval:g}"]


def parse_memory(text: str) -> NodeMemory:
    """The output of ``memory_argv``; ValueError when it holds no ``MemTotal`` (not a Linux
    node, or the command did not run)."""
    fields = parse_meminfo("\n".join(line for line in text.splitlines() if not line.startswith("psi ")))
    if "MemTotal" not in fields:
        raise ValueError("no MemTotal in /proc/meminfo")
    psi: dict[str, float] = {}
    for line in text.splitlines():
        m = _PSI.match(line)
        if m:
            psi[m.group(1)] = float(m.group(2))
    return NodeMemory(fields["MemTotal"], fields.get("MemAvailable", 0),
                      psi.get("some"), psi.get("full"))
