"""Runs the staging agent on every node at once and turns its JSON lines into progress events.

The agent is one standard-library file (``sparktui/agents/sparse_rows.py``), sent to the node's
``python3`` over the SSH channel's stdin (on the local cluster, over a pipe to this Python; the
runtime's ``Stage`` decides how), with
its bytecode compiled here: a node whose Python has this one's bytecode version runs that, and
any other compiles the text sent beside it (``LOADER``). Compiling the agent's text took 8-10 ms
of a sampled verification's 40 (docs/benchmarks.md). Nothing is written on the node: a file at
a fixed path in the node's world-writable ``/tmp`` could be planted or swapped by another user
of the node before it ran (issue 15). ``-I`` keeps the folder the command starts in and
``PYTHON*`` variables out of the agent's imports, and ``-S`` the node's site-packages: their
``.pth`` lines run code at every start, and the agent needs nothing there.
"""

from __future__ import annotations

import asyncio
import binascii
import functools
import importlib.util
import json
import marshal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktui.agents import sparse_rows
from sparktui.backend.events import StagingProgress
from sparktui.backend.nodeshell import NodeError
from sparktui.backend.together import together
from sparktui.core.plan import Plan, StagingPlan

if TYPE_CHECKING:
    from sparktui.backend.runtimes.base import Stage

AGENT = Path(sparse_rows.__file__)
LOADER = """\
import sys
magic, code, source = sys.stdin.buffer.read().split(b"\\n", 2)
try:
    import _frozen_importlib_external, binascii, marshal
    code = (marshal.loads(binascii.a2b_base64(code))
            if magic == _frozen_importlib_external.MAGIC_NUMBER.hex().encode() else None)
except Exception:  # another Python's internals, or bytecode it cannot read
    code = None
exec(code or compile(source, "sparse_rows.py", "exec", dont_inherit=True), {"__name__": "__main__"})
"""
"""The node's ``python3 -c``: runs the agent from its stdin (``agent_input``), the bytecode when
its version is this Python's, else the text."""


def agent_argv(spec: dict[str, Any], python: str = "python3") -> list[str]:
    """The command that runs the agent on a node (its stdin: ``agent_input()``)."""
    return [python, "-I", "-S", "-c", LOADER, json.dumps(spec)]


@functools.cache
def agent_input() -> str:
    """What the agent's stdin holds: this Python's bytecode version, the agent compiled by it
    (base64, one line), and the agent's text; made once a process (about 10 ms)."""
    source = AGENT.read_bytes()
    code = compile(source, "sparse_rows.py", "exec", dont_inherit=True, optimize=0)
    return "\n".join((importlib.util.MAGIC_NUMBER.hex(),
                      binascii.b2a_base64(marshal.dumps(code), newline=False).decode("ascii"),
                      source.decode("utf-8")))


@dataclass
class _Rate:
    """Bytes per second over the last few seconds (an ETA that follows the disks)."""

    samples: list[tuple[float, int]] = field(default_factory=list)

    def add(self, done: int) -> float:
        now = time.monotonic()
        if self.samples and done < self.samples[-1][1]:
            self.samples.clear()  # a new phase counts from zero
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > 5:
            self.samples.pop(0)
        (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0


@dataclass(frozen=True)
class StagingResult:
    node: str
    job: str
    ok: bool
    error: str | None
    files: list[dict[str, Any]]
    bytes_written: int
    seconds: float


class Stager:
    def __init__(self, plan: Plan, runtime: Stage, emit: Callable[[StagingProgress], None]) -> None:
        self.plan = plan
        self.runtime = runtime
        self.emit = emit

    async def run(self, verify_only: bool = False, sample: int | str | None = None) -> list[StagingResult]:
        """Every node's jobs in parallel; one node failing does not stop the others."""
        return list(await together(*(self._job(job, verify_only, sample)
                                           for job in self.plan.staging)))

    async def _job(self, job: StagingPlan, verify_only: bool, sample: int | str | None) -> StagingResult:
        spec: dict[str, Any] = {
            "src": job.src, "dst": job.dst, "id": job.id, "tensors": job.tensors,
            "world": job.world, "ranks": job.ranks, "min_free_bytes": job.min_free_bytes,
            "verify_only": verify_only, "node": job.node,
        }
        if sample is not None:
            spec["sample"] = sample
        rate = _Rate()
        final: dict[str, Any] = {}
        error: list[str] = []

        def on_line(line: str) -> None:
            if not line.strip():  # the SSH stream may end with an empty line: not a message
                return
            try:
                ev = json.loads(line)
            except ValueError:
                error.append(line)  # the node's python3 said something that is not ours
                return
            kind = ev.get("event")
            if kind == "progress":
                done, total = int(ev.get("bytes_done", 0)), int(ev.get("bytes_total", 0))
                bps = rate.add(done)
                eta = (total - done) / bps if bps > 0 else None
                self.emit(StagingProgress(job.node, job.id, str(ev.get("phase")), ev.get("file"),
                                          done, total, bps, eta))
            elif kind == "done":
                final.update(ev)
            elif kind == "error":
                error.append(str(ev.get("message")))

        self.emit(StagingProgress(job.node, job.id, "start"))
        try:
            rc = await self.runtime.run_agent(job.node, spec, on_line,
                                              await asyncio.to_thread(agent_input))
        except NodeError as exc:
            rc, error[:] = 1, [str(exc)]
        if rc != 0 or not final:
            message = error[-1] if error else f"{job.node}: staging agent exited with code {rc}"
            if not message.startswith(job.node):
                message = f"{job.node}: {message}"
            self.emit(StagingProgress(job.node, job.id, "failed", error=message))
            return StagingResult(job.node, job.id, False, message, [], 0, 0.0)
        files = list(final.get("files", []))
        written = int(final.get("bytes_written", 0))
        total = sum(int(f.get("bytes", 0)) for f in files)
        self.emit(StagingProgress(job.node, job.id, "done", None, total, total, 0.0, 0.0,
                                  result=final))
        return StagingResult(job.node, job.id, True, None, files, written,
                             float(final.get("seconds", 0.0)))
