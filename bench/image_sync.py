"""Image sync on the real 4-node test cluster (sparktui_testbed; needs root), against the pipe an
operator types by hand, in one run.

Builds a ~1 GiB image on node0 (`docker build` FROM the demo image with a random file, network
none), then measures, each time from targets that lack it:

- one target: `sparktui image sync` of a 2-node recipe (node0 -> node1) against the by-hand
  pipe `ssh node0 docker save IMG | ssh node1 docker load` (OpenSSH with the testbed's key and
  known_hosts: the same SSH servers and engines sparktui talks to), and that pipe with
  `-c aes128-gcm@openssh.com` (the cipher sparktui prefers);
- three targets: `sparktui image sync` of a 4-node recipe (node0 -> node1, node2, node3 from one
  save stream) against the pipe done for each target in turn, and against the same fan-out in C
  (`ssh node0 docker save | tee >(ssh node2 docker load) ... | ssh node1 docker load`).

sparktui runs as the operator runs it, a new process (imports, connections, version probes and
the final id checks included). Each line also says where the CPU went (core-seconds: the whole
machine busy, the nodes' dockerd and sshd, this script's children, and other work): the four
test nodes share this machine's cores. Targets: three targets take at most 1.3x one target;
sparktui to one node is no slower than the pipe to it. The image is removed from every node at
the end.

    python bench/image_sync.py [--mib 1024] [--runs 1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # sparktui_testbed sits at the repository root, outside the wheel

import docker  # noqa: E402
import docker.errors  # noqa: E402

import sparktui_testbed  # noqa: E402

IMAGE = "sparktui-bench-big:latest"
AES = "aes128-gcm@openssh.com"
RECIPE = """engine = "sglang"
name = "image sync bench ({n} nodes)"
docker_image = "{image}"
model = "sparktui/demo-model"
port = 30000
required_nodes = {n}
tensor_parallel_size = {n}
entrypoint = ["python3", "-m", "sparktui.demo.engine"]
"""


def engine(tb: sparktui_testbed.Testbed, i: int) -> docker.DockerClient:
    return docker.DockerClient(base_url=f"unix://{tb.nodes[i].docker_socket}", timeout=900)


def build_big(tb: sparktui_testbed.Testbed, mib: int, scratch: Path) -> str:
    """The big image on node0: the demo image plus ``mib`` MiB of random bytes in one layer."""
    context = scratch / "context.tar"
    with tarfile.open(context, "w") as tar:
        dockerfile = f"FROM {sparktui_testbed.IMAGE}\nCOPY big.bin /opt/big.bin\n".encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        big = scratch / "big.bin"
        with open(big, "wb") as f:
            for _ in range(mib):
                f.write(os.urandom(1 << 20))
        tar.add(big, arcname="big.bin")
        big.unlink()
    with open(context, "rb") as f:
        image, _ = engine(tb, 0).images.build(fileobj=f, custom_context=True, tag=IMAGE,
                                              network_mode="none", rm=True)
    context.unlink()
    return str(image.id)


def clear(tb: sparktui_testbed.Testbed, nodes: list[int]) -> None:
    for i in nodes:
        with contextlib.suppress(docker.errors.ImageNotFound):
            engine(tb, i).images.remove(IMAGE, force=True)


def image_id(tb: sparktui_testbed.Testbed, i: int) -> str | None:
    try:
        return str(engine(tb, i).images.get(IMAGE).id)
    except docker.errors.ImageNotFound:
        return None


def ssh(tb: sparktui_testbed.Testbed, i: int, command: str, cipher: str = "") -> str:
    how = f"-c {cipher} " if cipher else ""
    return (f"ssh {how}-i {tb.identity} -o UserKnownHostsFile={tb.known_hosts} "
            f"-o StrictHostKeyChecking=yes -o BatchMode=yes root@{tb.nodes[i].ip} {command}")


def by_hand(tb: sparktui_testbed.Testbed, targets: list[int], cipher: str = "") -> None:
    """The pipe an operator types, one target after the other."""
    for i in targets:
        subprocess.run(f"{ssh(tb, 0, f'docker save {IMAGE}', cipher)} | "
                       f"{ssh(tb, i, 'docker load -q', cipher)}",
                       shell=True, check=True, stdout=subprocess.DEVNULL)


def by_hand_tee(tb: sparktui_testbed.Testbed, targets: list[int]) -> None:
    """The same fan-out done with OpenSSH and tee: one save, every load at once (no Python)."""
    first, *rest = targets
    with tempfile.TemporaryDirectory() as fifos:
        loads = "".join(f"mkfifo {fifos}/{i}; {ssh(tb, i, 'docker load -q')} <{fifos}/{i} >/dev/null & "
                        for i in rest)
        subprocess.run(["bash", "-c", f"set -e -o pipefail; {loads}"
                        f"{ssh(tb, 0, f'docker save {IMAGE}')} | "
                        f"tee {' '.join(f'{fifos}/{i}' for i in rest)} | "
                        f"{ssh(tb, first, 'docker load -q')} >/dev/null; wait"], check=True)


def sparktui_sync(tb: sparktui_testbed.Testbed, recipe: Path, env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "sparktui", "image", "sync", str(recipe),
                           "--cluster", tb.cluster_file], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"sparktui image sync failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")


def _ticks(pid: int, children: bool) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None  # restarted meanwhile (a test that stops sshd): left out of the sum
    used = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return used / os.sysconf("SC_CLK_TCK")


class Cpu:
    """Core-seconds: the whole machine busy, and this work's share: the test nodes' dockerd and
    sshd (their session processes are reaped into the listener) and this script's children
    (sparktui, or ssh and docker for the pipe). The rest is other work on the machine."""

    def __init__(self, tb: sparktui_testbed.Testbed) -> None:
        self.pidfiles = [("dockerd", n.docker_pidfile, False) for n in tb.nodes] + \
            [("sshd", n.ssh_pidfile, True) for n in tb.nodes]

    def read(self) -> dict[str, float]:
        ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        hz = os.sysconf("SC_CLK_TCK")
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = {"busy": (sum(ticks) - ticks[3] - ticks[4]) / hz, "all": sum(ticks) / hz,
               "clients": kids.ru_utime + kids.ru_stime}
        for kind, pidfile, children in self.pidfiles:
            with contextlib.suppress(OSError, ValueError):
                pid = int(Path(pidfile).read_text())
                used = _ticks(pid, children)
                if used is not None:
                    out[f"{kind}:{pid}"] = used
        return out


def timed(tb: sparktui_testbed.Testbed, cpu: Cpu, targets: list[int], want: str,
          fn: Callable[[], None]) -> tuple[float, dict[str, float]]:
    clear(tb, targets)
    subprocess.run(["sync"], check=True)
    before = cpu.read()
    t0 = time.monotonic()
    fn()
    seconds = time.monotonic() - t0
    after = cpu.read()
    for i in targets:
        got = image_id(tb, i)
        if got != want:
            raise SystemExit(f"node{i} has {got}, expected {want}")
    used = {"busy": 0.0, "all": 0.0, "clients": 0.0, "dockerd": 0.0, "sshd": 0.0}
    for key in after.keys() & before.keys():  # a daemon restarted meanwhile is left out
        used[key.split(":")[0]] += after[key] - before[key]
    return seconds, used


def write_recipe(folder: Path, n: int) -> Path:
    path = folder / f"bench-sync-{n}" / "recipe.toml"
    path.parent.mkdir(parents=True)
    path.write_text(RECIPE.format(n=n, image=IMAGE))
    return path.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=1024, help="random bytes in the image (MiB)")
    ap.add_argument("--runs", type=int, default=1, help="runs of each measurement (median shown)")
    ap.add_argument("--dir", default="/var/tmp", help="scratch folder for the build context")
    args = ap.parse_args()
    tb = sparktui_testbed.up(4)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        scratch = Path(tmp)
        env = {**os.environ, "XDG_STATE_HOME": f"{tmp}/state", "XDG_CONFIG_HOME": f"{tmp}/config"}
        one, three = write_recipe(scratch, 2), write_recipe(scratch, 4)
        clear(tb, [0, 1, 2, 3])
        t0 = time.monotonic()
        want = build_big(tb, args.mib, scratch)
        size = engine(tb, 0).images.get(IMAGE).attrs["Size"]
        print(f"image {IMAGE} {want[7:19]} on node0: {size / 2**30:.2f} GiB "
              f"(built in {time.monotonic() - t0:.0f} s)")
        cpu = Cpu(tb)
        runs: dict[str, Callable[[], None]] = {
            "by hand, one target": lambda: by_hand(tb, [1]),
            "sparktui, one target": lambda: sparktui_sync(tb, one, env),
            "by hand, three targets": lambda: by_hand(tb, [1, 2, 3]),
            "sparktui, three targets": lambda: sparktui_sync(tb, three, env),
            "by hand with -c aes128-gcm, one target": lambda: by_hand(tb, [1], AES),
            "by hand with tee, three targets at once": lambda: by_hand_tee(tb, [1, 2, 3]),
        }
        r: dict[str, list[tuple[float, dict[str, float]]]] = {k: [] for k in runs}
        try:
            timed(tb, cpu, [1], want, lambda: by_hand(tb, [1]))  # warm-up: page cache, connections
            for _ in range(args.runs):
                for name, fn in runs.items():
                    r[name].append(timed(tb, cpu, [1] if "one" in name else [1, 2, 3], want, fn))
        finally:
            clear(tb, [0, 1, 2, 3])
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
          f"Python {platform.python_version()}; {args.runs} run(s) each, median")
    print("by hand: ssh node0 docker save IMG | ssh nodeK docker load -q (OpenSSH client and "
          "servers, default cipher chacha20-poly1305), one target after the other")
    print(f"{'':40s} {'seconds':>8s} {'MiB/s':>6s}   core-s: {'busy':>5s} of {'all':>5s} "
          f"{'dockerd':>7s} {'sshd':>5s} {'clients':>7s} {'other':>5s}")
    m: dict[str, float] = {}
    for name, results in r.items():
        seconds = statistics.median(t for t, _ in results)
        m[name] = seconds
        c = {k: statistics.median(u[k] for _, u in results) for k in results[0][1]}
        other = c["busy"] - c["dockerd"] - c["sshd"] - c["clients"]
        mib = size / 2**20 * (1 if "one" in name else 3) / seconds
        print(f"{name:40s} {seconds:8.2f} {mib:6.0f}   {'':8s}{c['busy']:5.1f} of {c['all']:5.1f} "
              f"{c['dockerd']:7.1f} {c['sshd']:5.1f} {c['clients']:7.1f} {other:5.1f}")
    one_s, three_s = m["sparktui, one target"], m["sparktui, three targets"]
    print(f"sparktui one target / by hand one target: {one_s / m['by hand, one target']:.2f}x "
          "(target <= 1.00x)")
    print(f"sparktui three targets / sparktui one target: {three_s / one_s:.2f}x (target <= 1.30x)")
    print(f"by hand three targets / sparktui three targets: {m['by hand, three targets'] / three_s:.2f}x")

if __name__ == "__main__":
    main()
