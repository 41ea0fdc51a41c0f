"""The kernel's verdict on a node: the lines of its kernel messages that say why a rank died
(an out-of-memory kill naming the process and its cgroup, NVIDIA's ``NVRM: Xid`` and other
``NVRM:`` errors, PCIe ``AER:`` errors), read by one fixed script (``kmsg_argv``) and parsed here.

On a DGX Spark an engine that takes too much is not told so by CUDA: the kernel kills it, and
its container only shows exit 137. The kernel's line is the proof, and it names the container
through the task's memory cgroup (``task_memcg=/docker/<id>``, ``/system.slice/docker-<id>.scope``,
or under a ``--cgroup-parent``). Nodes may share one kernel (the test cluster does, as do
containers of several operators on one box): a finding is matched to a rank by its container
id, never by the node alone.

The script prints a ``source`` line (``dmesg`` or ``journalctl``) then the matching lines, or one
``denied`` / ``missing`` line per reader it tried: a node whose kernel messages cannot be read
(``kernel.dmesg_restrict``, a user outside ``adm``/``systemd-journal``) is a sentence, never a
traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal

PATTERN = r"oom-kill:|Killed process|NVRM:|AER:"
"""What the node's grep keeps (an extended regex, passed as an argument, never spliced)."""
MAX_LINES = 400
"""At most this many of the newest matching lines come back (bounded output)."""
MAX_CHARS = 1000
"""Each line cut to this many characters on the node."""

KMSG_SCRIPT = (
    'p=$1; n=$2; c=$3; '
    # dmesg first: it needs CAP_SYSLOG where kernel.dmesg_restrict=1 (it says so, exit 1)
    'e=$(dmesg --time-format=iso 2>&1 >/dev/null); '
    'if [ $? -eq 0 ]; then echo "source dmesg"; '
    'dmesg --time-format=iso 2>/dev/null | grep -E -e "$p" | tail -n "$n" | cut -c "1-$c"; exit 0; fi; '
    'printf "denied dmesg: %s\\n" "$(printf %s "$e" | head -n 1 | cut -c 1-200)"; '
    'if ! command -v journalctl >/dev/null 2>&1; then echo "missing journalctl"; exit 0; fi; '
    'e=$(journalctl -k -b --no-pager -o short-iso -n 1 2>&1 >/dev/null); r=$?; '
    'case $e in *ermission*|*"not seeing messages"*|*"No journal files"*) r=1;; esac; '
    'if [ $r -eq 0 ]; then echo "source journalctl"; '
    'journalctl -k -b -q --no-pager -o short-iso 2>/dev/null | grep -E -e "$p" | tail -n "$n" '
    '| cut -c "1-$c"; exit 0; fi; '
    'printf "denied journalctl: %s\\n" "$(printf %s "$e" | head -n 1 | cut -c 1-200)"'
)

Kind = Literal["oom_kill", "xid", "nvrm", "aer"]
KIND_NAMES: dict[Kind, str] = {"oom_kill": "out of memory", "xid": "NVIDIA Xid",
                               "nvrm": "NVIDIA driver", "aer": "PCIe AER"}


def kmsg_argv(max_lines: int = MAX_LINES) -> list[str]:
    """The node's kernel messages that matter, newest ``max_lines``: a fixed script, the
    pattern and bounds as positional arguments."""
    return ["sh", "-c", KMSG_SCRIPT, "sparktui-kmsg", PATTERN, str(max_lines), str(MAX_CHARS)]


@dataclass(frozen=True)
class KernelFinding:
    """One kernel line that matters: when (epoch seconds, and the node's clock as it printed
    it), what, the process it names, and the container its cgroup names (a 64-hex id)."""

    kind: Kind
    at: float
    clock: str  # HH:MM:SS as the node printed it
    text: str  # the kernel's words, after the time stamp
    process: str | None = None
    pid: int | None = None
    container: str | None = None
    memcg: str | None = None

    @property
    def sentence(self) -> str:
        """``out of memory, 12:03:05, process python3, pid 42`` (no container name: the caller
        knows the rank's; see ``oom_text``) or ``NVIDIA Xid, 12:03:05: NVRM: Xid (...)``."""
        if self.kind == "oom_kill":
            return f"out of memory, {self.clock}{_who(self)}"
        return f"{KIND_NAMES[self.kind]}, {self.clock}: {self.text}"

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "at": self.at, "clock": self.clock, "text": self.text,
                "process": self.process, "pid": self.pid, "container": self.container}


def _who(f: KernelFinding) -> str:
    parts = ([f"process {f.process}"] if f.process else []) + \
        ([f"pid {f.pid}"] if f.pid is not None else [])
    return f", {', '.join(parts)}" if parts else ""


def oom_text(f: KernelFinding, container_name: str, exit_code: int | None) -> str:
    """The rank's cause text: ``out of memory, 12:03:05, container NAME (process python3, pid
    N), exit code 137``."""
    who = _who(f).removeprefix(", ")
    text = f"out of memory, {f.clock}, container {container_name}" + (f" ({who})" if who else "")
    return text + (f", exit code {exit_code}" if exit_code is not None else "")


@dataclass(frozen=True)
class KernelRead:
    """What the script gave: the reader that worked (None: none could), its findings, and
    why each reader tried could not read (``denied dmesg: ...``)."""

    source: str | None
    findings: list[KernelFinding]
    problems: list[str]

    def why_not(self) -> str:
        """Why the node's kernel messages could not be read, and what to do (a NodeError's
        reason: the node's name goes before it)."""
        said = "; ".join(self.problems) or "no reader answered"
        return (f"its kernel messages cannot be read ({said}); to see out-of-memory kills and "
                "GPU errors, let the connecting user read them (sudo sysctl "
                "kernel.dmesg_restrict=0, or add the user to the adm or systemd-journal group)")


# 2026-12-02T06:21:40,095842+00:00 (dmesg); 2026-12-02T06:21:40+0000 or +00:00 (journalctl)
_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[,.](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?\s+(.*)$")
_JOURNAL_HEAD = re.compile(r"^\S+ kernel: (.*)$")  # journalctl's "host kernel: " before the words
_OOM_KILL = re.compile(r"oom-kill:(\S*)")
_KILLED = re.compile(r"(?:Out of memory|Memory cgroup out of memory)(?: \(oom_kill_allocating_task\))?: "
                     r"Killed process (\d+) \(([^)]*)\)")
_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)(.*)")
_ID = re.compile(r"(?<![0-9a-f])([0-9a-f]{64})(?![0-9a-f])")
_NVRM_INFO = ("loading NVIDIA", "GPU at ", "NVRM: RmInitAdapter", "krcWatchdog")


def _stamp(line: str) -> tuple[float, str, str] | None:
    m = _TS.match(line)
    if m is None:
        return None
    base, frac, zone, rest = m.groups()
    try:
        at = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    tz = timezone.utc
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            return None
        tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
    epoch = at.replace(tzinfo=tz).timestamp() + (int(frac) / 10 ** len(frac) if frac else 0.0)
    head = _JOURNAL_HEAD.match(rest)
    return epoch, base[11:19], head.group(1) if head else rest


def _fields(spec: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        if sep:
            out.setdefault(key, value)
    return out


def _container(memcg: str | None) -> str | None:
    if not memcg:
        return None
    ids = _ID.findall(memcg)
    return ids[-1] if ids else None


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and len(text) < 12 else None


def parse_line(line: str) -> KernelFinding | None:
    """One line of ``dmesg --time-format=iso`` or ``journalctl -k -o short-iso``; None for a
    line that is not one of the kinds (or not a kernel line at all)."""
    stamped = _stamp(line.rstrip("\r\n"))
    if stamped is None:
        return None
    at, clock, text = stamped
    m = _OOM_KILL.search(text)
    if m is not None:
        f = _fields(m.group(1))
        memcg = f.get("task_memcg") or f.get("oom_memcg")
        return KernelFinding("oom_kill", at, clock, text, f.get("task") or None,
                             _int(f.get("pid")), _container(memcg), memcg)
    k = _KILLED.search(text)
    if k is not None:
        return KernelFinding("oom_kill", at, clock, text, k.group(2) or None, _int(k.group(1)))
    x = _XID.search(text)
    if x is not None:
        extra = _fields(x.group(3).replace(" ", ""))
        return KernelFinding("xid", at, clock, text, extra.get("name") or None,
                             _int(extra.get("pid")))
    if "NVRM:" in text:
        return None if any(s in text for s in _NVRM_INFO) else KernelFinding("nvrm", at, clock, text)
    if "AER:" in text:
        return KernelFinding("aer", at, clock, text)
    return None


def parse_kernel(text: str) -> list[KernelFinding]:
    """Every finding in the lines, oldest first; a kill said twice (the ``oom-kill:`` line
    naming the cgroup, then ``Killed process N``) is one finding, the first's."""
    found: list[KernelFinding] = []
    for line in text.splitlines():
        f = parse_line(line)
        if f is None:
            continue
        if f.kind == "oom_kill" and f.container is None and f.memcg is None:
            twin = next((g for g in reversed(found[-8:]) if g.kind == "oom_kill"
                         and g.pid == f.pid and abs(g.at - f.at) < 5), None)
            if twin is not None:
                continue
        found.append(f)
    return found


def parse_read(text: str) -> KernelRead:
    """The script's output (``kmsg_argv``)."""
    source: str | None = None
    problems: list[str] = []
    body: list[str] = []
    for line in text.splitlines():
        if source is None:
            if line.startswith("source "):
                source = line.removeprefix("source ").strip()
            elif line.startswith(("denied ", "missing ")):
                problems.append(line.strip()[:300])
            continue
        body.append(line)
    return KernelRead(source, parse_kernel("\n".join(body)), problems)


def since(findings: list[KernelFinding], epoch: float) -> list[KernelFinding]:
    return [f for f in findings if f.at >= epoch]


def killed(findings: list[KernelFinding], container_id: str) -> KernelFinding | None:
    """The newest out-of-memory kill whose cgroup names this container (a full 64-hex id, or
    the 12-character short one Docker prints)."""
    cid = container_id.strip().lower()
    if len(cid) < 12:
        return None
    hits = [f for f in findings if f.kind == "oom_kill" and f.container is not None
            and f.container.startswith(cid)]
    return hits[-1] if hits else None


def node_level(findings: list[KernelFinding]) -> list[KernelFinding]:
    """The GPU and PCIe findings (they name no container: a node's, not a rank's)."""
    return [f for f in findings if f.kind != "oom_kill"]
