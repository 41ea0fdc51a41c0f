"""One 100 MB line without a newline from a rank on the real test cluster: ``sparktui logs``
(which catches the run's files up from the container, through the node's SSH tunnel) copies
it in memory that does not grow with the line, in time that grows with it linearly, and every
byte of it is in the run's file, as pieces of at most 32 KiB that join back to the line.

Before, the pump joined bytes to bytes: 10 MB took minutes, and Docker's timestamp of every
16 KiB message ended up inside the line."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import pytest

from sparktui.agents.local_shim import CONTINUED, MAX_LINE_BYTES
from tests.conftest import ROOT
from tests.realparts.conftest import IMAGE
from tests.runner import TRACEBACK, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

PRINTABLE = bytes(range(33, 127))  # 94 characters: the line's pieces never line up with it
SCRIPT = '''
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
signal.signal(signal.SIGUSR1, lambda *_: None)  # caught: the test sees it is safe to send
signal.sigwait({signal.SIGUSR1})  # sent once every up has ended: the logs process reads it all
n = int(os.environ["LINE_BYTES"])
block = bytes(range(33, 127)) * ((1 << 20) // 94 + 1)
while n > 0:
    sys.stdout.buffer.write(block[:min(n, len(block))])
    n -= min(n, len(block))
sys.stdout.flush()
'''
SIZES = {"base": 1_000, "ten": 10_000_000, "hundred": 100_000_000}
# each long line three times, the fastest kept: on two cores shared with other test runs one
# measurement of the 100 MB line took 2.3 s, another 5.1 s
RUNS = ["base", *["ten", "hundred"] * 3]


def expected(size: int) -> str:
    whole, rest = divmod(size, len(PRINTABLE))
    h = hashlib.sha256()
    for _ in range(whole):
        h.update(PRINTABLE)
    h.update(PRINTABLE[:rest])
    return h.hexdigest()


def recipe(tmp_path: Path, name: str, size: int) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "recipe.toml").write_text(
        f'engine = "sglang"\ndocker_image = "{IMAGE}"\nmodel = "x/long-line"\n'
        f"required_nodes = 1\ntensor_parallel_size = 1\nentrypoint = [\"python3\", \"-c\", "
        f'"""{SCRIPT}"""]\n[env]\nLINE_BYTES = "{size}"\n')
    return folder


def measured_logs(cmd: list[str], env: dict[str, str], timeout: float) -> int:
    """Peak RSS (KiB) of the process running ``cmd``: its own (``wait4``), not this one's."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            pytest.fail(f"{' '.join(cmd[3:5])} still running after {timeout} s")
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.returncode == 0 and TRACEBACK not in err, err
    return usage.ru_maxrss


def ingest_seconds(timing: Path) -> float:
    """From the Docker client ready to the last batch of lines written (``SPARKTUI_TIMING``)."""
    marks = [line.split(" ", 1) for line in timing.read_text().splitlines()]
    start = next(float(t) for t, what in marks if what.startswith("docker node0: client ready"))
    return max(float(t) for t, what in marks if what.startswith("rank 0: ")) - start


def joined(run_file: Path) -> tuple[int, str, int]:
    """The run file's pieces joined back: (bytes, sha256, pieces); each piece within the cap."""
    h, size, pieces = hashlib.sha256(), 0, 0
    with run_file.open("rb") as f:
        for raw in f:
            text = raw.rstrip(b"\n").partition(b"\t")[2]
            assert len(text) <= MAX_LINE_BYTES + len(CONTINUED.encode())
            if pieces:
                assert text.startswith(CONTINUED.encode()), text[:40]
                text = text[len(CONTINUED.encode()):]
            h.update(text)
            size += len(text)
            pieces += 1
    return size, h.hexdigest(), pieces


def waits_for_the_signal(container: Any) -> bool:
    """Whether the container's script catches SIGUSR1 (sent before, it would end the script;
    blocked before it is caught, so it waits for it in ``sigwait``)."""
    top = container.top()
    pid_col, cmd_col = top["Titles"].index("PID"), top["Titles"].index("CMD")
    for proc in top["Processes"]:
        if "python3" in proc[cmd_col] and "docker-init" not in proc[cmd_col]:
            status = Path(f"/proc/{proc[pid_col]}/status").read_text()
            caught = int(next(line for line in status.splitlines()
                              if line.startswith("SigCgt:")).split()[1], 16)
            return bool(caught & (1 << (signal.SIGUSR1 - 1)))
    return False


def test_one_long_line_is_copied_in_bounded_memory_linear_time_every_byte(
        testbed: Any, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    node0 = docker.DockerClient(base_url=f"unix://{testbed.nodes[0].docker_socket}")
    state = tmp_path / "state"
    env = state_env(state)
    rss: dict[str, int] = {}
    seconds: dict[str, float] = {}
    folders = [(key, recipe(tmp_path, f"long-{key}{i}-{tag}", SIZES[key])) for i, key in enumerate(RUNS)]
    clis = [sparktui_cli(testbed.cluster_file, env, folder) for _, folder in folders]
    try:
        # every up at once: what each proves is measured after them, one logs process at a time
        with ThreadPoolExecutor(len(clis)) as pool:
            ups = list(pool.map(lambda cli: cli("up"), clis))
        for up in ups:
            assert up.returncode == 0, up.stderr
        started = [node0.containers.get(f"sparktui-{folder.name}-r0") for _, folder in folders]
        deadline = time.monotonic() + 60
        while not all(waits_for_the_signal(c) for c in started):
            assert time.monotonic() < deadline, "a container is not waiting for its signal"
            time.sleep(0.1)
        for c in started:  # the lines are written now that no up runs any more
            c.kill(signal="SIGUSR1")
        deadline = time.monotonic() + 120
        for c in started:
            while (c.reload(), c.status)[1] != "exited":
                assert time.monotonic() < deadline, f"{c.name} still writing"
                time.sleep(0.2)
            assert c.attrs["State"]["ExitCode"] == 0, c.attrs["State"]
        for key, folder in folders:
            timing = tmp_path / f"timing-{folder.name}"
            peak = measured_logs(
                [sys.executable, "-m", "sparktui", "logs", str(folder), "--cluster",
                 testbed.cluster_file], {**env, "SPARKTUI_TIMING": str(timing)}, timeout=120)
            rss[key] = max(rss.get(key, 0), peak)
            seconds[key] = min(seconds.get(key, float("inf")), ingest_seconds(timing))
            (run_dir,) = (state / "sparktui" / "runs").glob(f"{folder.name}-*")
            size, digest, pieces = joined(run_dir / "r0.log")
            assert (size, digest) == (SIZES[key], expected(SIZES[key])), key
            assert pieces == -(-SIZES[key] // MAX_LINE_BYTES), key
    finally:
        for cli in clis:  # one at a time: seven at once took longer (each catches its line up)
            cli("down")
    growth_mib = (rss["hundred"] - rss["base"]) / 1024
    ratio = seconds["hundred"] / seconds["ten"]
    print(f"peak RSS {rss} KiB (growth {growth_mib:.1f} MiB); ingest {seconds} s (ratio {ratio:.1f})")
    assert growth_mib < 64, rss
    # ten times the bytes: 10x when linear, 100x when quadratic. CI's loaded 2 cores have
    # measured 16.3x (the short run is 0.2 s, where a scheduler's hiccup weighs most): 30 keeps
    # the test about the shape, not about the machine's load
    assert ratio < 30, seconds
