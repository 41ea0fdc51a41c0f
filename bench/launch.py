"""Launch latency on the real 4-node test cluster (sparktui_testbed; needs root), and where it goes.

For several runs of ``sparktui up RECIPE --cluster testbed --wait`` (a new process, as an
operator runs it) with a demo image that is ready at once, prints the time from invocation until
every container runs (the last ``rank N: booting`` line) and until ready is reported (the
``ready:`` line), and how long after the last rank's own ready line (rank 0's "The server is fired
up and ready to roll!", each worker's "Worker ready; serving /health ...", as the node's Docker
engine stamped them in the run's log files) ready was reported. ``down`` between runs (not timed).

Where the time goes comes from the CLI's timing log (``SPARKTUI_TIMING``, see
``sparktui/core/timing.py``): process start and imports, loading the plan, the SSH connects, the
Docker clients and the label search (attach), the image and port checks, each container's create and
start, the first log lines, the ready line, the probes. In the same run, the floor it is
measured against: ``python -c pass`` (a process start), one OpenSSH login to a node (``ssh
node true``), and one container create+start on a node's engine straight from this machine.

Targets (medians): every container running <= 1.0 s; ready reported <= 0.2 s after the last
rank's ready line. ``--nodes 4,8,16`` runs the same on a test cluster of each size (rebuilt for
it, a rank a node: the demo recipe with that TP size) and prints, per size, all running, ready
and every phase, then what grows with the node count (each phase's slope in ms a node, from the
smallest size to the largest) and the largest size's time against the smallest's (issue 30: 16
nodes within 1.5x the 4-node time). The same runs then go to the test cluster's Slurm (its cluster file: one
allocation, a step per rank through the login node): every rank running <= 1.5 s, printed beside
the SSH runtime's figure. ``--compare`` alternates with ``--launch-order workers-first`` runs (the old
default) and prints the ratio. Run under the shared lock (``flock /tmp/sparktui-realparts.lock``); the
numbers move with whatever else shares the machine, so it prints the load too.

    python bench/launch.py [--runs 5] [--nodes 4[,8,16]] [--compare] [--marks]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # sparktui_testbed sits at the repository root, outside the wheel

import sparktui_testbed  # noqa: E402
from bench.demo_run import demo_recipe, world_edits  # noqa: E402

RUNNING_TARGET_S = 1.0
SLURM_RUNNING_TARGET_S = 1.5
READY_AFTER_LINE_TARGET_S = 0.2
READY_LINES = ("The server is fired up and ready to roll!", "Worker ready; serving /health")
GROWTH_TARGET = 1.5  # the largest size's all-running time over the smallest's


def instant_recipe(folder: Path, world: int) -> Path:
    """The demo recipe, ready at once, as a group of ``world`` ranks."""
    slug = "bench-instant"
    demo_recipe(folder / f"n{world}", slug,
                [('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"'), *world_edits(world)],
                "launch")
    return folder / f"n{world}" / slug


def epoch(ts: str) -> float:
    """Seconds since the epoch of an RFC 3339 UTC stamp as the run's files hold them."""
    base, _, frac = ts.rstrip("Z").partition(".")
    whole = datetime.strptime(base[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return whole + (int(frac[:9].ljust(9, "0")) / 1e9 if frac else 0.0)


@dataclass
class Launch:
    running: float = float("nan")  # from invocation, seconds
    ready: float = float("nan")
    last_ready_line: float = float("nan")  # the last rank's ready line, from invocation
    marks: list[tuple[float, str]] = field(default_factory=list)  # (from invocation, what)

    @property
    def ready_after_line(self) -> float:
        return self.ready - self.last_ready_line

    def first(self, pattern: str) -> float:
        return next((t for t, what in self.marks if re.search(pattern, what)), float("nan"))

    def last(self, pattern: str) -> float:
        return max((t for t, what in self.marks if re.search(pattern, what)), default=float("nan"))


def one_run(recipe: Path, cluster: str, env: dict[str, str], timing: Path,
            order: str = "parallel", world: int = 4) -> Launch:
    timing.unlink(missing_ok=True)
    wall_minus_mono = time.time() - time.monotonic()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "up", str(recipe), "--cluster", cluster,
                             "--wait", "--launch-order", order], cwd=ROOT,
                            env={**env, "SPARKTUI_TIMING": str(timing)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    res = Launch()
    booting: set[str] = set()
    run_dir: Path | None = None
    said: list[str] = []
    for line in proc.stdout:
        now = time.monotonic() - t0
        said.append(line)
        if ": booting" in line and line.startswith("rank "):
            booting.add(line.split(":")[0])
            if len(booting) == world:
                res.running = now
        if line.startswith("ready:"):
            res.ready = now
        found = re.search(r"logs in (\S+)", line)
        if found:
            run_dir = Path(found.group(1))
    if proc.wait() != 0:
        raise SystemExit(f"up failed (exit {proc.returncode}):\n{''.join(said)}")
    subprocess.run([sys.executable, "-m", "sparktui", "down", str(recipe), "--cluster", cluster],
                   cwd=ROOT, env=env, capture_output=True, check=True)
    for raw in (timing.read_text() if timing.exists() else "").splitlines():  # none: an older sparktui
        stamp, _, what = raw.partition(" ")
        res.marks.append((float(stamp) - t0, what))
    if run_dir is not None:  # the ready lines as each node's engine stamped them (wall clock)
        stamps = []
        for rank in range(world):
            for text in (run_dir / f"r{rank}.log").read_text().splitlines():
                ts, _, body = text.partition("\t")
                if any(r in body for r in READY_LINES):
                    stamps.append(epoch(ts) - wall_minus_mono - t0)
                    break
        if len(stamps) == world:
            res.last_ready_line = max(stamps)
    return res


def floor(cluster_file: str) -> dict[str, float]:
    """What a launch cannot beat, measured now: a process start, an SSH login to a node, and a
    container create+start on a node's engine (through its socket, no SSH)."""
    import docker

    tb = sparktui_testbed.load()
    assert tb is not None
    node = tb.nodes[0]
    out: dict[str, float] = {}
    t = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    out["python -c pass"] = time.monotonic() - t
    ssh = ["ssh", "-i", tb.identity, "-o", f"UserKnownHostsFile={tb.known_hosts}", "-o", "BatchMode=yes",
           "-p", str(node.ssh_port), f"root@{node.ip}", "true"]
    t = time.monotonic()
    subprocess.run(ssh, check=True, capture_output=True)
    out["ssh node0 true (OpenSSH, new connection)"] = time.monotonic() - t
    client = docker.DockerClient(base_url=f"unix://{node.docker_socket}", version="auto")
    t = time.monotonic()
    c = client.containers.run(tb.image, ["true"], detach=True, network_mode="host",
                              init=True, labels={"sparktui-bench": "floor"})
    out["container create+start on node0 (docker SDK, socket)"] = time.monotonic() - t
    c.remove(force=True)
    client.close()
    return out


def floor_all(tb: sparktui_testbed.Testbed) -> float:
    """Every node's engine creating and starting a container at once, straight from this
    machine (the docker SDK through each node's socket, a thread a node, no SSH and no
    sparktui): what ``up`` on this cluster cannot beat, however parallel sparktui is. On the test
    cluster every engine shares this machine's cores; on a real one each has its own."""
    import concurrent.futures

    import docker

    clients = [docker.DockerClient(base_url=f"unix://{n.docker_socket}", version="auto")
               for n in tb.nodes]

    def one(client: docker.DockerClient) -> None:
        c = client.containers.run(tb.image, ["true"], detach=True, network_mode="host", init=True,
                                  labels={"sparktui-bench": "floor"})
        c.remove(force=True)

    def started(client: docker.DockerClient) -> float:
        t = time.monotonic()
        c = client.containers.run(tb.image, ["sleep", "5"], detach=True, network_mode="host",
                                  init=True, labels={"sparktui-bench": "floor"})
        done = time.monotonic() - t
        c.remove(force=True)
        return done

    with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
        list(pool.map(one, clients))  # warm-up
        t = time.monotonic()
        list(pool.map(started, clients))
        seconds = time.monotonic() - t
    for client in clients:
        client.close()
    return seconds


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return (f"{os.cpu_count()} cores ({cpu}), Linux {platform.release()}, Python "
            f"{platform.python_version()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, load {load}")


PHASES: list[tuple[str, str, str]] = [
    # (label, from, to): the first mark matching each regex ("^": the invocation; "last:": the
    # last mark matching, for steps that run on every node or rank at once)
    ("process start, imports, arguments", "^", r"^cli: up"),
    ("plan loaded (recipe, cluster, lints)", r"^cli: up", r"^cli: plan loaded"),
    ("SSH connects (every node at once)", r"^ssh .*: connecting", r"last:^ssh .*: connected"),
    ("then the last Docker client open", r"last:^ssh .*: connected", r"last:^docker .*: client ready"),
    ("attach (containers by label, every node)", r"^up: attach", r"^up: image check"),
    ("image check, container names", r"^up: image check", r"^up: port check"),
    ("port check (every rank's API port, from its node)", r"^up: port check", r"^up: memory check"),
    ("memory fit (read beside the checks above), the rest of its wait", r"^up: memory check",
     r"^up: run created"),
    ("run folder, then every container created and started", r"^up: run created",
     r"last:^rank \d+: booting"),
    ("last container running -> rank 0's ready line seen", r"last:^rank \d+: booting",
     r"^rank 0: ready line seen"),
    ("rank 0's ready line seen -> every rank ready (probes)", r"^rank 0: ready line seen",
     r"^board: every rank ready"),
    ("every rank ready -> verdict printed", r"^board: every rank ready", r"^cli: verdict printed"),
]


def at(run: Launch, which: str) -> float:
    if which == "^":
        return 0.0
    if which.startswith("last:"):
        return run.last(which[5:])
    return run.first(which)


def phase(run: Launch, start: str, end: str) -> float:
    return at(run, end) - at(run, start)


@dataclass
class Size:
    """The runs on a test cluster of one size."""

    nodes: int
    runs: list[Launch] = field(default_factory=list)
    serial: list[Launch] = field(default_factory=list)
    on_slurm: list[Launch] = field(default_factory=list)
    floor_all: float = float("nan")  # every node's engine creating and starting one at once

    def phases(self) -> dict[str, float]:
        """Each phase's median over the runs (a phase no run marked is left out)."""
        out = {}
        for label, start, end in PHASES:
            values = [v for v in (phase(r, start, end) for r in self.runs) if v == v]
            if values:
                out[label] = statistics.median(values)
        return out


def med(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def measure(world: int, args: argparse.Namespace, tmp: Path, env: dict[str, str]) -> Size:
    tb = sparktui_testbed.up(world)
    cluster = str(tb.cluster_file)
    recipe = instant_recipe(tmp, world)
    timing = tmp / "timing.log"
    size = Size(world)
    one_run(recipe, cluster, env, timing, world=world)  # warm-up: page cache, first container start
    for i in range(args.runs):
        for order, into in (("parallel", size.runs), ("workers-first", size.serial)):
            if order != "parallel" and not args.compare:
                continue
            into.append(one_run(recipe, cluster, env, timing, order, world))
            r = into[-1]
            print(f"  {world} nodes, run {i + 1} ({order}): all running {r.running:.2f} s, ready "
                  f"reported {r.ready:.2f} s, {r.ready_after_line:.3f} s after the last rank's "
                  "ready line", flush=True)
            if args.marks:
                for t, what in r.marks:
                    print(f"      {t:7.3f}  {what}")
    size.floor_all = statistics.median(floor_all(tb) for _ in range(3))
    print(f"  {world} nodes: every node's engine creating and starting a container at once, "
          f"straight from this machine: {size.floor_all:.2f} s", flush=True)
    if tb.slurm is not None:  # the same recipe, one allocation and a step per rank
        slurm_cluster = tb.slurm.cluster_file
        one_run(recipe, slurm_cluster, env, timing, world=world)  # warm-up
        for i in range(args.runs):
            size.on_slurm.append(one_run(recipe, slurm_cluster, env, timing, world=world))
            r = size.on_slurm[-1]
            print(f"  {world} nodes, run {i + 1} (Slurm): all running {r.running:.2f} s, ready "
                  f"reported {r.ready:.2f} s", flush=True)
            if args.marks:
                for t, what in r.marks:
                    print(f"      {t:7.3f}  {what}")
    return size


def report(size: Size) -> None:
    runs, world = size.runs, size.nodes
    running = [r.running for r in runs]
    ready = [r.ready for r in runs]
    after = [r.ready_after_line for r in runs]
    m_running, m_after = statistics.median(running), statistics.median(after)
    print(f"\nsparktui up --wait on the {world}-node test cluster, {len(runs)} runs (after one warm-up)")
    print(f"  all containers running: {med(running)}  target <= {RUNNING_TARGET_S:g} s: "
          f"{'met' if m_running <= RUNNING_TARGET_S else 'MISSED'}")
    print(f"  ready reported:         {med(ready)}")
    print(f"  ready after the last rank's ready line: median {m_after * 1e3:.0f} ms (min "
          f"{min(after) * 1e3:.0f}, max {max(after) * 1e3:.0f})  target <= "
          f"{READY_AFTER_LINE_TARGET_S * 1e3:.0f} ms: "
          f"{'met' if m_after <= READY_AFTER_LINE_TARGET_S else 'MISSED'}")
    if size.serial:
        m_serial = statistics.median([r.running for r in size.serial])
        print(f"  the same run, --launch-order workers-first (the head after its workers): all running "
              f"{med([r.running for r in size.serial])}; all at once is {m_serial / m_running:.2f}x faster")
    if size.on_slurm:
        m_slurm = statistics.median([r.running for r in size.on_slurm])
        print(f"  on the Slurm runtime (salloc, a step per rank): all ranks running "
              f"{med([r.running for r in size.on_slurm])}  target <= {SLURM_RUNNING_TARGET_S:g} s: "
              f"{'met' if m_slurm <= SLURM_RUNNING_TARGET_S else 'MISSED'}; "
              f"{m_slurm / m_running:.2f}x the SSH runtime's {m_running:.2f} s")
        print(f"                          ready reported: {med([r.ready for r in size.on_slurm])}")
    print("  where the time goes (medians; phases overlap where they run at once):")
    for label, seconds in size.phases().items():
        print(f"    {label:<54} {seconds * 1e3:6.0f} ms")
    each = [r.first(rf"^rank {k}: booting") - r.first(rf"^rank {k}: create$")
            for r in runs for k in range(world)]
    each = [v for v in each if v == v]
    if each:
        print(f"    {'(one container create+start, each rank; median)':<54} "
              f"{statistics.median(each) * 1e3:6.0f} ms")


def growth(sizes: list[Size]) -> None:
    """What grows with the node count: each figure's slope from the smallest size to the
    largest, and the largest's all-running time over the smallest's."""
    small, large = sizes[0], sizes[-1]
    span = large.nodes - small.nodes
    print(f"\nfrom {small.nodes} to {large.nodes} nodes (ms a node, from the medians):")

    def row(label: str, a: float, b: float) -> None:
        print(f"    {label:<54} {a * 1e3:6.0f} -> {b * 1e3:6.0f} ms  {(b - a) / span * 1e3:+6.1f} ms a node")

    row("all containers running", statistics.median(r.running for r in small.runs),
        statistics.median(r.running for r in large.runs))
    row("ready reported", statistics.median(r.ready for r in small.runs),
        statistics.median(r.ready for r in large.runs))
    a, b = small.phases(), large.phases()
    for label in a:
        if label in b:
            row(label, a[label], b[label])
    if small.on_slurm and large.on_slurm:
        row("on Slurm: all ranks running", statistics.median(r.running for r in small.on_slurm),
            statistics.median(r.running for r in large.on_slurm))
    row("the floor: every node's engine creating and starting one at once (no sparktui)",
        small.floor_all, large.floor_all)
    small_run = statistics.median(r.running for r in small.runs)
    large_run = statistics.median(r.running for r in large.runs)
    row("all running less that floor (what sparktui adds)", small_run - small.floor_all,
        large_run - large.floor_all)
    ratio = large_run / small_run
    print(f"  all running at {large.nodes} nodes is {ratio:.2f}x the {small.nodes}-node time  target "
          f"<= {GROWTH_TARGET:g}x: {'met' if ratio <= GROWTH_TARGET else 'MISSED'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--nodes", default="4", metavar="N[,N...]",
                    help="test cluster sizes, a rank a node (default 4), e.g. 4,8,16")
    ap.add_argument("--marks", action="store_true", help="print every run's timing log")
    ap.add_argument("--compare", action="store_true",
                    help="alternate with runs of --launch-order workers-first (the old default)")
    args = ap.parse_args()
    worlds = sorted({int(n) for n in args.nodes.split(",")})
    print(f"machine: {machine()}", flush=True)
    sizes: list[Size] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_STATE_HOME": f"{tmp}/state", "XDG_CONFIG_HOME": f"{tmp}/config"}
        for world in worlds:
            sizes.append(measure(world, args, Path(tmp), env))
        base = floor(str(sparktui_testbed.up(worlds[-1]).cluster_file))
    for size in sizes:
        report(size)
    if len(sizes) > 1:
        growth(sizes)
    print("  the floor, measured now:")
    for label, seconds in base.items():
        print(f"    {label:<54} {seconds * 1e3:6.0f} ms")


if __name__ == "__main__":
    main()
