"""A container's processes as sparktui reads them (Docker's ``top``, or ``/proc`` on the local
cluster), which of them is the engine, and what its samples say: alive, gone, stopped, or not
moving. Pure: the runtimes hand in what ps or ``/proc`` printed, the engine watch keeps the
samples.

Why the engine and not the container: a recipe whose command is a shell wrapper (``sh -c
'python3 -m sglang.launch_server ...; sleep infinity'``) keeps its container running after the
engine died, and nothing else would notice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

PS_ARGS = "-eo pid,stat,time,comm,args"
"""What Docker's ``top`` is asked for: dockerd runs the host's ``ps`` with these arguments
(adding ``-q <the container's pids>``, or filtering the whole list itself where ``-q`` fails),
so the pids are the node's, not the container's."""
PS_COLUMNS = 5

NOT_ENGINE: frozenset[str] = frozenset({
    "docker-init", "tini", "init", "dumb-init", "sh", "bash", "dash", "ash", "zsh", "sleep",
    "timeout", "tail", "py-spy", "ps", "kill", "cat",
})
"""Commands that are never the engine, whatever their arguments name: the container's init,
a shell wrapper (its ``-c`` text names the engine's module), what waits after the engine, and
what sparktui itself runs in the container."""

INITS: frozenset[str] = frozenset({"docker-init", "tini", "init", "dumb-init"})
"""A container's init: when only it is left, the container is ending with its engine (an init
exits once its child did), not running on without it."""

DEMO_MARK = "sparktui.demo.engine"
"""The demo engine's module: an engine process under any adapter (the demo recipes say
``engine = "sglang"``)."""

STUCK_SAMPLES = 2
"""Samples in a row with the engine's CPU time unchanged and no new log line: a warning."""


@dataclass(frozen=True)
class Proc:
    """One process of a container: its pid as the runtime sees it (Docker: the node's), its
    state letter (``R``, ``S``, ``D``, ``T``, ``Z``, ...), CPU seconds, command and arguments."""

    pid: int
    state: str
    cpu_s: float
    comm: str
    args: str

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "state": self.state, "cpu_s": self.cpu_s, "comm": self.comm,
                "args": self.args}

    def line(self) -> str:
        """One row of a process list as a dump shows it."""
        return f"{self.pid:>7} {self.state:<5} {self.cpu_s:>9.0f} {self.comm:<15} {self.args}"


PROC_HEADER = f"{'PID':>7} {'STAT':<5} {'CPU s':>9} {'COMM':<15} ARGS"


def masked(procs: Iterable[Proc], mask: Callable[[str], str]) -> list[Proc]:
    """The list with ``mask`` (``plan.redactor().text``) over every command line: an engine's
    arguments may carry an API key."""
    return [replace(p, comm=mask(p.comm), args=mask(p.args)) for p in procs]


def ps_seconds(text: str) -> float:
    """ps's ``time`` column (``[DD-]HH:MM:SS``, ``MM:SS``) or plain seconds, as seconds; ``-``
    (no time) is 0. ValueError for anything else."""
    text = text.strip()
    if text in ("", "-"):
        return 0.0
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if len(parts) > 3 or not all(p.replace(".", "", 1).isdigit() for p in parts):
        raise ValueError(f"not a ps time: {text!r}")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + float(part)
    return seconds + (int(days) * 86400 if days else 0)


def from_top(titles: Sequence[str], rows: Iterable[Sequence[str]]) -> list[Proc]:
    """Docker's ``top`` answer for ``PS_ARGS``: its titles (PID STAT TIME COMMAND COMMAND) and
    rows, the last column holding the whole command line. ValueError when the titles are not
    the five asked for (a ps that ignored the arguments)."""
    if len(titles) != PS_COLUMNS or titles[0].upper() != "PID":
        raise ValueError(f"ps answered columns {list(titles)!r}, not {PS_ARGS!r}")
    out = []
    for row in rows:
        if len(row) < PS_COLUMNS:
            continue
        pid, state, cpu, comm = row[:4]
        args = " ".join(row[4:])
        if not pid.isdigit():
            continue
        out.append(Proc(int(pid), state, ps_seconds(cpu), comm, args))
    return out


def from_proc(pid: int, stat: str, cmdline: bytes, ticks: int) -> Proc | None:
    """One process from ``/proc/<pid>/stat`` and ``/proc/<pid>/cmdline`` (``ticks``: the
    clock's ticks per second, ``os.sysconf("SC_CLK_TCK")``); None for a line that is not one."""
    head, sep, rest = stat.rpartition(")")
    if not sep or "(" not in head:
        return None
    comm = head.partition("(")[2]
    fields = rest.split()
    try:
        state, utime, stime = fields[0], int(fields[11]), int(fields[12])
    except (IndexError, ValueError):
        return None
    args = " ".join(a.decode("utf-8", "replace") for a in cmdline.split(b"\0") if a)
    return Proc(pid, state, (utime + stime) / ticks, comm, args or f"[{comm}]")


@dataclass(frozen=True)
class ProcStat:
    """What a restart's wait needs of ``/proc/<pid>/stat``: the state, the parent, the
    process group and the start time (clock ticks after boot: with the pid, which process)."""

    state: str
    ppid: int
    pgid: int
    start: int


def proc_stat(stat: str) -> ProcStat | None:
    """A ``/proc/<pid>/stat`` line read (the command's name may hold spaces and parentheses:
    the fields start after its last ``)``); None for a line that is not one."""
    fields = stat.rpartition(")")[2].split()
    try:
        return ProcStat(fields[0], int(fields[1]), int(fields[2]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def proc_group(stat: str) -> int | None:
    """The process group of a ``/proc/<pid>/stat`` line (a local rank is its group)."""
    st = proc_stat(stat)
    return st.pgid if st is not None else None


def inner_pid(status: str) -> int | None:
    """The pid inside the process's own pid namespace (the container's), from the ``NSpid:``
    line of ``/proc/<pid>/status``: its last field. None when the line is missing (a kernel
    before 4.1)."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            fields = line.split()[1:]
            return int(fields[-1]) if fields and fields[-1].isdigit() else None
    return None


def engine_procs(procs: Iterable[Proc], marks: Sequence[str]) -> list[Proc]:
    """The processes that are the engine's: their command line names one of ``marks`` (the
    adapter's, and the demo engine's module), and they are not a shell, an init or a sleep."""
    found = []
    for p in procs:
        name = p.comm.rsplit("/", 1)[-1]
        if name in NOT_ENGINE or p.state.startswith(("Z", "X")):
            continue
        if any(m in p.args or m in p.comm for m in marks):
            found.append(p)
    return found


@dataclass(frozen=True)
class EngineSample:
    """What one look into a rank's container found: its engine (the first of its processes,
    the one the others were started from), the CPU seconds of all of them, what else runs."""

    main: Proc | None
    cpu_s: float
    others: tuple[str, ...]  # the commands that are not the engine ("sh", "sleep")
    count: int  # the engine's processes

    @property
    def runs_on(self) -> bool:
        """Something besides the init still runs (a wrapper's shell, its sleep)."""
        return any(o.rsplit("/", 1)[-1] not in INITS for o in self.others)

    @staticmethod
    def of(procs: Sequence[Proc], marks: Sequence[str]) -> EngineSample:
        engine = engine_procs(procs, marks)
        mine = {p.pid for p in engine}
        others = tuple(dict.fromkeys(p.comm for p in procs if p.pid not in mine))
        return EngineSample(engine[0] if engine else None, sum(p.cpu_s for p in engine), others,
                            len(engine))


@dataclass(frozen=True)
class EngineView:
    """A rank's engine as the ranks table, ``status`` and the rank's detail show it."""

    pid: int | None
    state: str | None
    cpu_s: float | None
    warning: str | None = None  # stopped, or not moving while the log is silent

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "state": self.state, "cpu_s": self.cpu_s, "warning": self.warning}

    def sentence(self) -> str:
        if self.pid is None:
            return self.warning or "no engine process"
        text = f"engine pid {self.pid} ({self.state}), {self.cpu_s or 0:.0f} CPU s"
        return f"{text}; {self.warning}" if self.warning else text


def gone_text(sample: EngineSample) -> str:
    """What runs in a container whose engine is gone, for its cause (``engine_gone``)."""
    return ", ".join(sample.others) or "nothing but its init"


class EngineTrack:
    """One rank's samples since its launch: whether its engine was seen (only an engine once
    seen can be gone: a wrapper may install things first), and how long its CPU time and its
    log stood still."""

    def __init__(self) -> None:
        self.seen = False
        self.cpu_s: float | None = None
        self.still = 0  # samples in a row with the same CPU time and no new line

    def add(self, sample: EngineSample, log_moved: bool, interval: float) -> tuple[EngineView, bool]:
        """The view after this sample, and whether the engine is gone (seen before, not now)."""
        if sample.main is None:
            gone = self.seen and sample.runs_on
            said = ("its engine process is gone" if gone else "its engine process ended"
                    if self.seen else "no engine process in its container (yet)")
            return EngineView(None, None, None, said), gone
        self.seen = True
        if self.cpu_s is not None and sample.cpu_s <= self.cpu_s and not log_moved:
            self.still += 1
        else:
            self.still = 0
        self.cpu_s = sample.cpu_s
        main = sample.main
        warning = None
        if main.state.startswith("T"):
            warning = "stopped (state T): it runs no code until sent SIGCONT"
        elif self.still >= STUCK_SAMPLES:
            quiet = self.still * interval
            warning = (f"no CPU time and no log line for {quiet:.0f} s: idle, or stuck "
                       "(a dump shows its stacks)")
        return EngineView(main.pid, main.state, sample.cpu_s, warning), False


DEMO_STACK_SIGNAL = "SIGUSR1"
"""The demo engine's ``faulthandler.register``: every thread's stack on stderr, and it runs on."""


def marks_of(process_marks: Sequence[str]) -> tuple[str, ...]:
    """The words an engine's processes are found by: its adapter's, and the demo engine's."""
    return (*process_marks, DEMO_MARK)


def stack_signal(adapter_signal: str | None, engine: Proc) -> str | None:
    """The signal that prints ``engine``'s stacks: the demo engine's, else its adapter's."""
    if DEMO_MARK in engine.args:
        return DEMO_STACK_SIGNAL
    return adapter_signal


_STACK_LINE = re.compile(r"^(?:(?:Current )?[Tt]hread 0x[0-9a-f]+|Stack \(most recent call first\)"
                         r"|\s+File \"|\s+<no Python frame>|\s*$)")
"""faulthandler's lines: a thread's head, its frames, the blank line between threads."""
_STACK_HEAD = re.compile(r"^(?:Current )?[Tt]hread 0x[0-9a-f]+|^Stack \(most recent call first\)")


def stack_line(text: str) -> bool:
    """Whether ``text`` is a line of a stack dump (or blank): not the rank getting on with its
    boot (a dump's signal makes every rank print one: it must not end a rank's silence)."""
    return bool(_STACK_LINE.match(text))


def stack_lines(lines: list[str]) -> list[str]:
    """The faulthandler block in ``lines`` (what a rank printed after its stack signal): from
    the first thread's head to the last frame; what else the rank printed meanwhile is left
    out."""
    out: list[str] = []
    for text in lines:
        if not out:
            if _STACK_HEAD.match(text):
                out.append(text)
        elif _STACK_LINE.match(text):
            out.append(text)
    while out and not out[-1].strip():
        out.pop()
    return out


def says_fatal(lines: Iterable[str], fatal: Sequence[str]) -> bool:
    """Whether one of ``lines`` holds one of the ``fatal`` lines (``core.engines.FATAL_LINES``,
    whose `` ... `` stands for anything)."""
    parts = [f.split(" ... ") for f in fatal]
    for line in lines:
        for pieces in parts:
            at = 0
            for piece in pieces:
                at = line.find(piece, at)
                if at < 0:
                    break
                at += len(piece)
            else:
                return True
    return False
