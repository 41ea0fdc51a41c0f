"""A restart's wait, the pure part: what a node's memory was before the launch (the baseline,
kept in the run's events), whether it is back, what of the old container is left, and the
sentence the ranks show while they wait.

On a unified-memory node (a DGX Spark) the old engine's memory comes back slowly after its
container is removed (the driver tears the GPU context down, pages are freed in the
background) and a process stuck in the driver can outlive its container. A new engine started
before that loads its weights into what is left and wedges the host: so a restart waits until
``MemAvailable`` is back to within ``restart_margin`` of the baseline and no process of the old
container remains, every second, up to ``restart_wait`` (then goes on and says so).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparktui.core.procs import ProcStat
from sparktui.core.runstore import ts_epoch
from sparktui.core.units import format_bytes

BASELINE_EVENT = "memory-baseline"
WAIT_EVENT = "memory-wait"
POLL_S = 1.0
"""How often a waiting restart reads the node's memory and looks for the old processes."""
PROGRESS_EVERY_S = 5.0
"""How often a wait's figures go into the run's events (``progress``): what another process
(``status``) shows while the waiting one holds the run."""
STALE_AFTER_S = 15.0
"""A wait whose last event is older than this is no longer live (its process went away)."""
LEFT_END = "---sparktui-left---"

_CONTAINER_ID = re.compile(r"^[0-9a-f]{12,64}$")

LEFTOVER_SCRIPT = (
    # $1: the old container's id (hex, checked before): every process whose cgroup names it,
    # zombies left out (they hold no memory); shell builtins only, one pass over /proc
    'id=$1; for d in /proc/[0-9]*; do f=; '
    'while IFS= read -r l; do case $l in *"$id"*) f=1; break;; esac; done 2>/dev/null < "$d/cgroup"; '
    '[ -n "$f" ] || continue; '
    'IFS= read -r s 2>/dev/null < "$d/stat" || continue; s=${s##*) }; '
    'case $s in Z*|X*) continue;; esac; echo "${d#/proc/}"; done; echo ' + LEFT_END
)


def is_container_id(text: str) -> bool:
    """A Docker container id (or its short form): hex only, so it can go into a pattern."""
    return bool(_CONTAINER_ID.match(text))


def leftover_argv(container_id: str) -> list[str]:
    """The fixed script that lists the node's processes of ``container_id`` (its id as an
    argument, never in the script); ValueError for an id that is not hex."""
    if not is_container_id(container_id):
        raise ValueError(f"{container_id[:80]!r} is not a container id")
    return ["sh", "-c", LEFTOVER_SCRIPT, "sparktui-leftovers", container_id]


def parse_leftovers(text: str) -> list[int]:
    """The pids ``leftover_argv`` printed; ValueError when its end line is missing (the
    script did not run through)."""
    lines = text.splitlines()
    if LEFT_END not in lines:
        raise ValueError("the list of processes was cut short")
    return sorted(int(line) for line in lines[:lines.index(LEFT_END)] if line.strip().isdigit())


@dataclass(frozen=True)
class Baseline:
    """A node's memory just before the launch's first container started (bytes)."""

    node: str
    available: int
    total: int

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "available": self.available, "total": self.total}


def baselines_of(events: Iterable[Mapping[str, Any]]) -> dict[str, Baseline]:
    """The launch's baseline per node from a run's events (the last ``memory-baseline``);
    empty when the launch recorded none (an older sparktui, or no node could be read)."""
    found: dict[str, Baseline] = {}
    for ev in events:
        if ev.get("kind") != BASELINE_EVENT:
            continue
        found = {}
        for row in ev.get("nodes") or []:
            if not isinstance(row, dict):
                continue
            node, avail, total = row.get("node"), row.get("available"), row.get("total")
            if isinstance(node, str) and isinstance(avail, int) and isinstance(total, int):
                found[node] = Baseline(node, avail, total)
    return found


@dataclass(frozen=True)
class NodeWait:
    """Where one node's wait stands: its memory now against the baseline, and the old
    container's processes still there.

    ``available`` None: the memory could not be read (``why``); ``baseline`` None: the launch
    recorded none, so memory is not waited on. ``left`` None: the old processes are not looked
    for on this runtime (``left_why`` says why)."""

    node: str
    available: int | None
    baseline: int | None
    margin: int
    left: tuple[int, ...] | None = None
    seconds: float = 0.0
    why: str | None = None
    left_why: str | None = None

    @property
    def needed(self) -> int | None:
        return None if self.baseline is None else max(0, self.baseline - self.margin)

    @property
    def memory_back(self) -> bool:
        """Nothing to wait for on memory: back within the margin, or nothing to judge by (no
        baseline, or the node's memory cannot be read now: said in the text, not waited on,
        as a node that cannot be asked would hold the restart for the whole wait)."""
        need = self.needed
        return need is None or self.available is None or self.available >= need

    @property
    def processes_gone(self) -> bool:
        return not self.left

    @property
    def done(self) -> bool:
        return self.memory_back and self.processes_gone

    @property
    def text(self) -> str:
        """``node1: 19.2 GiB available of 21.0 GiB needed; 3 old processes left; 12 s``: the
        rank's cause while it waits, short (the rank's detail is one line beside its container);
        where the need comes from is in ``figures``, which the notices and events say."""
        return f"{self._parts(full=False)}; {self.seconds:.0f} s"

    @property
    def figures(self) -> str:
        """The figures, with where the need comes from, without the seconds (a notice says
        them once)."""
        return self._parts(full=True)

    def _parts(self, full: bool) -> str:
        parts = [self._memory_text(full)]
        if self.left:
            n = len(self.left)
            parts.append(f"{n} old process{'es' if n != 1 else ''} left")
        return "; ".join(parts)

    def _memory_text(self, full: bool) -> str:
        need = self.needed
        if need is None or self.baseline is None:
            return f"{self.node}: no memory reading from before the launch: not waited on"
        if self.available is None:
            return (f"{self.node}: its memory could not be read, not waited on "
                    f"({self.why or 'no reason given'})")
        have = f"{self.node}: {format_bytes(self.available)} available"
        was = (f" ({format_bytes(self.baseline)} at launch less {format_bytes(self.margin)})"
               if full else "")
        if self.available >= need:
            return f"{have}, back to {format_bytes(need)} or more{was}"
        return f"{have} of {format_bytes(need)} needed{was}"

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "available": self.available, "baseline": self.baseline,
                "margin": self.margin, "needed": self.needed,
                "left": list(self.left) if self.left is not None else None,
                "seconds": round(self.seconds, 1), "text": self.text}


def timeout_text(waits: Iterable[NodeWait], limit_s: float) -> str:
    """The notice of a wait that ran out: what was still missing, per node."""
    missing = [w for w in waits if not w.done]
    what = "; ".join(w.figures for w in missing) or "nothing"
    return (f"the restart waited {limit_s:.0f} s (restart_wait) for memory to come back and "
            f"the old processes to go, and goes on anyway: {what}")


def open_wait(events: Iterable[Mapping[str, Any]], now_epoch: float) -> dict[int, str]:
    """Rank -> the wait's text, for a wait another process is in now (its last
    ``memory-wait`` event is a start or progress, newer than ``STALE_AFTER_S``); empty when
    none."""
    last: Mapping[str, Any] | None = None
    for ev in events:
        if ev.get("kind") == WAIT_EVENT:
            last = ev
    if last is None or last.get("phase") not in ("start", "progress"):
        return {}
    at = ts_epoch(last.get("ts"))
    if at is None or now_epoch - at > STALE_AFTER_S:
        return {}
    texts: dict[int, str] = {}
    for row in last.get("nodes") or []:
        if isinstance(row, dict) and isinstance(row.get("text"), str):
            for rank in row.get("ranks") or []:
                if isinstance(rank, int):
                    texts[rank] = row["text"]
    return texts


def rank_tree(stats: Mapping[int, ProcStat], leader: int) -> dict[int, int]:
    """pid -> start time of a local rank's processes: its process group (``leader``'s) and
    every descendant of the leader, those that left the group (a new session) included."""
    children: dict[int, list[int]] = {}
    for pid, st in stats.items():
        children.setdefault(st.ppid, []).append(pid)
    found = {pid for pid, st in stats.items() if st.pgid == leader}
    todo = [leader, *found]
    while todo:
        pid = todo.pop()
        for kid in children.get(pid, []):
            if kid not in found:
                found.add(kid)
                todo.append(kid)
    if leader in stats:
        found.add(leader)
    return {pid: stats[pid].start for pid in sorted(found) if pid in stats}
