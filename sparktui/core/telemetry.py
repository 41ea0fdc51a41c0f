"""Node telemetry: what one cheap command per node prints, parsed.

On a DGX Spark (GB10) GPU memory IS system memory: nvidia-smi reports every memory field as
``[N/A]`` / ``Not Supported``, so memory comes from ``/proc/meminfo`` (``MemAvailable`` is the
number that decides whether a boot or a long prompt survives) and is labelled unified.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DEFAULT_INTERVAL = 2.0  # seconds between two samples of a node (console setting: [telemetry] interval)
LOW_MEMORY = 8 * 2**30  # the head's MemAvailable below this stalls the whole TP group: warn

SECTION = "---sparktui---"
INVALID = "invalid-path"
GPU_QUERY = "index,name,utilization.gpu,temperature.gpu,power.draw,memory.used,memory.total"

# One fixed script; paths come after it as positional arguments ("$@"), never spliced in.
# Shell builtins read /proc, so a sample forks only df (once per path) and, where present,
# nvidia-smi: it runs every two seconds on every node. The sample is gathered in ``$o`` and
# written at once: a write per line was a read by sshd and an SSH packet each, about twelve a
# sample, and the packets were most of what watching a node cost this process (bench/telemetry.py).
_NL = "n='\n'; "
SAMPLE_BODY = (
    _NL + "o=; while IFS= read -r l; do case $l in MemTotal:*|MemFree:*|MemAvailable:*) o=${o}$l$n;; "
    "esac; done < /proc/meminfo; o=${o}" + SECTION + "$n; "
    "read -r l < /proc/loadavg; o=${o}$l$n" + SECTION + "$n; "
    "read -r l < /proc/stat; o=${o}$l$n" + SECTION + "$n; "
    "if command -v nvidia-smi >/dev/null 2>&1; then r=$(nvidia-smi --query-gpu=" + GPU_QUERY +
    " --format=csv,noheader,nounits 2>&1 || echo nvidia-smi-failed); [ -n \"$r\" ] && o=${o}$r$n; "
    "else o=${o}no-nvidia-smi$n; fi; o=${o}" + SECTION + "$n; "
    # per path: the free space of the nearest existing folder (a dst may not exist yet). Only
    # absolute paths are walked (each step cuts a "/..." off, so the walk ends at "/"); any
    # other is answered "invalid" at once: "rel", "~/x" or "-P" once looped forever here. The
    # path reaches df as an operand, after "--".
    "for p in \"$@\"; do o=${o}#$n; case $p in /*) ;; *) o=${o}" + INVALID + "$n; continue;; esac; "
    "d=$p; while [ ! -e \"$d\" ] && [ \"$d\" != / ]; do d=${d%/*}; d=${d:-/}; done; "
    "r=$(df -Pk -- \"$d\" 2>/dev/null); [ -n \"$r\" ] && o=${o}$r$n; done; true"
)
SAMPLE_SCRIPT = SAMPLE_BODY + "; printf %s \"$o\""


END = "---sparktui-end---"


def valid_path(path: str) -> bool:
    """A path the sampling script accepts: absolute. A relative one or ``~`` has no meaning in
    a shell started by sshd (no expansion of a quoted operand), so it is refused before it is
    sent and reported as invalid."""
    return path.startswith("/")


def sample_argv(paths: list[str]) -> list[str]:
    return ["sh", "-c", SAMPLE_SCRIPT, "sparktui-sample", *paths]


def sample_loop_argv(paths: list[str], interval: float) -> list[str]:
    """The same sample every ``interval`` seconds from one long-lived command: no process or
    SSH channel is set up per sample, so watching costs almost nothing on either side."""
    loop = f"while :; do {{ {SAMPLE_BODY}; }}; printf '%s%s\\n' \"$o\" {END}; sleep \"$0\"; done"
    return ["sh", "-c", loop, f"{interval:g}", *paths]


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str
    util_pct: float | None
    temp_c: float | None
    power_w: float | None
    mem_used: int | None  # bytes; None where the GPU cannot say (unified memory)
    mem_total: int | None


@dataclass(frozen=True)
class DiskSample:
    path: str
    free: int
    total: int


@dataclass(frozen=True)
class NodeSample:
    mem_total: int
    mem_available: int
    unified: bool  # GPU memory is system memory: the GPUs report none of their own
    load1: float
    cpu_ticks: tuple[int, int]  # (busy, total) jiffies since boot; two samples give a CPU %
    gpus: list[GpuSample] = field(default_factory=list)
    disks: list[DiskSample] = field(default_factory=list)
    gpu_note: str = ""  # "no nvidia-smi", or what nvidia-smi said when it failed

    def cpu_pct(self, previous: NodeSample | None) -> float | None:
        if previous is None:
            return None
        busy = self.cpu_ticks[0] - previous.cpu_ticks[0]
        total = self.cpu_ticks[1] - previous.cpu_ticks[1]
        return 100.0 * busy / total if total > 0 else None

    def disk(self, path: str) -> DiskSample | None:
        return next((d for d in self.disks if d.path == path), None)

    def to_json(self) -> dict[str, object]:
        return {
            "mem_total": self.mem_total, "mem_available": self.mem_available,
            "unified_memory": self.unified, "load1": self.load1,
            "gpus": [g.__dict__ for g in self.gpus], "disks": [d.__dict__ for d in self.disks],
            "gpu_note": self.gpu_note,
        }


def _number(text: str) -> float | None:
    """``11.17 W``, ``0 %``, ``143771 MiB``, ``[N/A]``, ``Not Supported`` -> a number or None."""
    t = text.strip()
    if not t or t.startswith("[") or t.lower() in ("n/a", "not supported", "[not supported]"):
        return None
    t = t.split()[0]
    try:
        return float(t)
    except ValueError:
        return None


def parse_meminfo(text: str) -> dict[str, int]:
    """Bytes per field (``MemAvailable``...); the kernel writes kB."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def parse_cpu(line: str) -> tuple[int, int]:
    """``cpu  user nice system idle iowait irq softirq steal ...`` -> (busy, total)."""
    fields = [int(x) for x in line.split()[1:] if x.isdigit()]
    if len(fields) < 4:
        return (0, 0)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return (total - idle, total)


def parse_gpus(text: str, columns: list[str] | None = None) -> tuple[list[GpuSample], str]:
    """nvidia-smi ``--query-gpu`` CSV, with a header line (``--format=csv``) or without one
    (``noheader``: ``columns`` names them, default this project's own query). Units in cells
    or headers, ``[N/A]`` and ``Not Supported`` are handled; one line per GPU."""
    stripped = text.strip()
    if stripped == "no-nvidia-smi":
        return [], "no nvidia-smi"
    lines = [ln for ln in stripped.splitlines() if ln.strip()]
    names = columns or GPU_QUERY.split(",")
    if lines and not lines[0].split(",")[0].strip()[:1].isdigit() and "," in lines[0] and (
            "memory" in lines[0] or "index" in lines[0] or "utilization" in lines[0]):
        names = [c.split("[")[0].strip() for c in lines[0].split(",")]
        lines = lines[1:]
    gpus = []
    for row, line in enumerate(lines):
        cells = dict(zip(names, (c.strip() for c in line.split(",")), strict=False))
        if len(cells) < len(names):
            continue

        def num(key: str, cells: dict[str, str] = cells) -> float | None:
            return _number(cells.get(key, ""))

        index = cells.get("index", str(row))
        used, total = num("memory.used"), num("memory.total")
        gpus.append(GpuSample(
            index=int(index) if index.isdigit() else row, name=cells.get("name", "GPU"),
            util_pct=num("utilization.gpu"), temp_c=num("temperature.gpu"),
            power_w=num("power.draw"),
            mem_used=int(used * 2**20) if used is not None else None,
            mem_total=int(total * 2**20) if total is not None else None,
        ))
    note = "" if gpus or not stripped else stripped.splitlines()[-1][:200]
    return gpus, note


def parse_df(text: str, paths: list[str]) -> list[DiskSample]:
    """One ``#`` line per path asked for, then df's output for it (nothing if df failed)."""
    disks = []
    blocks = text.split("#\n")[1:]
    for path, block in zip(paths, blocks, strict=False):
        rows = block.strip().splitlines()
        if rows == [INVALID]:
            continue
        parts = rows[-1].split() if len(rows) > 1 else []
        if len(parts) >= 6 and parts[1].isdigit() and parts[3].isdigit():
            disks.append(DiskSample(path=path, free=int(parts[3]) * 1024, total=int(parts[1]) * 1024))
    return disks


def parse_sample(text: str, paths: list[str]) -> NodeSample:
    """The output of ``sample_argv(paths)``; disks are keyed by the paths asked for."""
    parts = re.split(rf"^{SECTION}\n?", text, flags=re.M)
    while len(parts) < 5:
        parts.append("")
    mem = parse_meminfo(parts[0])
    load = parts[1].split()
    gpus, note = parse_gpus(parts[3])
    disks = parse_df(parts[4], paths)
    unified = bool(gpus) and all(g.mem_total is None for g in gpus)
    return NodeSample(
        mem_total=mem.get("MemTotal", 0),
        mem_available=mem.get("MemAvailable", mem.get("MemFree", 0)),
        unified=unified,
        load1=_number(load[0]) or 0.0 if load else 0.0,
        cpu_ticks=parse_cpu(parts[2].strip()),
        gpus=gpus, disks=disks, gpu_note=note,
    )
