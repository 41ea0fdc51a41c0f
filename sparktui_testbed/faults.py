"""Faults a real cluster has, injected into a test node and mended again: its dockerd killed,
paused or started again, its network cut (every packet in and out dropped but the node's own
loopback). The chaos soak (``tests/chaos``) and the tests of each fault use these; ``up`` on a
reused testbed mends what a test left (``mend_all``).

A cut is a pair of iptables rules in the node's network namespace, tagged with a comment so
that mending removes exactly them (and every copy, should a cut be injected twice). A paused
dockerd is SIGSTOPped: its API socket accepts connections that are never answered, as a
wedged engine's does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from . import daemons
from .layout import Node, Paths, Testbed
from .procs import alive, daemon_pid, kill, proc_state, wait_gone
from .runner import TestbedError, log

CUT_TAG = "sptb-cut"
_CUT_RULES = (("INPUT", "!", "-i", "lo"), ("OUTPUT", "!", "-o", "lo"))


def _iptables(node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nsenter", f"--net={node.netns_path}", "iptables", "-w", "5", *args],
                          capture_output=True, text=True, timeout=30)


def _rule(chain: tuple[str, ...]) -> list[str]:
    return [*chain, "-m", "comment", "--comment", CUT_TAG, "-j", "DROP"]


def cut(node: Node) -> None:
    """Drop every packet to and from the node (its loopback aside): a partition, not a refusal."""
    for chain in _CUT_RULES:
        res = _iptables(node, "-I", *_rule(chain))
        if res.returncode != 0:
            raise TestbedError(f"{node.name}: iptables -I {chain[0]}: {res.stderr.strip()}")
    log(f"{node.name}: network cut")


def mend(node: Node) -> None:
    """Take the cut's rules away (every copy); nothing when there are none."""
    for chain in _CUT_RULES:
        for _ in range(100):
            if _iptables(node, "-D", *_rule(chain)).returncode != 0:
                break
    log(f"{node.name}: network mended")


def is_cut(node: Node) -> bool:
    res = _iptables(node, "-S")
    return CUT_TAG in res.stdout


def dockerd_pid(node: Node) -> int | None:
    return daemon_pid(node.docker_pidfile, node.docker_data_root)


def _children(pid: int, comm: str) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, _, rest = text.partition(" (")[2].rpartition(") ")
        if name == comm and int(rest.split()[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def kill_dockerd(node: Node) -> int:
    """SIGKILL the node's dockerd and the containerd it runs, as a crash of the engine's
    service would (a containerd left behind holds its socket, and the next dockerd cannot start
    its own); the containers' shims are left to what Docker does about them when it starts
    again. The dead pid is returned."""
    pid = dockerd_pid(node)
    if pid is None:
        raise TestbedError(f"{node.name}: dockerd is not running")
    managed = _children(pid, "containerd")
    if proc_state(pid) == "T":  # a stopped process takes SIGKILL too, but say it plainly
        kill(pid, signal.SIGCONT)
    for victim in (pid, *managed):
        kill(victim, signal.SIGKILL)
    if wait_gone([pid, *managed], 10):
        raise TestbedError(f"{node.name}: dockerd {pid} or its containerd survived SIGKILL")
    log(f"{node.name}: dockerd {pid} killed")
    return pid


def pause_dockerd(node: Node) -> int:
    """SIGSTOP the node's dockerd: its socket takes connections and answers none."""
    pid = dockerd_pid(node)
    if pid is None:
        raise TestbedError(f"{node.name}: dockerd is not running")
    kill(pid, signal.SIGSTOP)
    log(f"{node.name}: dockerd {pid} paused")
    return pid


def resume_dockerd(node: Node) -> None:
    pid = dockerd_pid(node)
    if pid is not None:
        kill(pid, signal.SIGCONT)
        log(f"{node.name}: dockerd {pid} resumed")


def start_dockerd(tb: Testbed, node: Node) -> int:
    """The node's dockerd again (nothing when it runs; a paused one is resumed), tried up to
    three times."""
    pid = dockerd_pid(node)
    if pid is not None and alive(pid):
        if proc_state(pid) == "T":
            kill(pid, signal.SIGCONT)
        return pid
    _forget_dead_containerd(node)
    for attempt in range(3):  # as systemd's Restart= would: dockerd gives its new containerd
        try:                  # ~10 s, which a loaded machine restoring shims may not meet
            return daemons.start_dockerd(node, Paths(tb.state_dir), tb.storage_driver)
        except TestbedError:
            if attempt == 2:
                raise
            log(f"{node.name}: dockerd did not start; again")
    raise AssertionError("unreachable")


def _forget_dead_containerd(node: Node) -> None:
    """The killed containerd's pid file taken away: until its zombie is reaped (by whatever
    inherited it) the pid still exists, and dockerd, finding it, dials that containerd's
    socket for 15 s and gives up instead of starting its own (every first start after a kill
    failed so)."""
    pidfile = Path(node.docker_exec_root) / "containerd" / "containerd.pid"
    try:
        pid = int(pidfile.read_text().strip() or 0)
    except (OSError, ValueError):
        return
    if not alive(pid):
        pidfile.unlink(missing_ok=True)


def mend_all(tb: Testbed) -> list[str]:
    """Every fault of this module taken away on every node; what was mended, said."""
    said = []
    for node in tb.nodes:
        try:
            said += _mend(tb, node)
        except (OSError, subprocess.SubprocessError, TestbedError) as exc:  # a broken node:
            said.append(f"{node.name}: not mended ({exc})")  # reuse's health check says so
    return said


def _mend(tb: Testbed, node: Node) -> list[str]:
    said = []
    if is_cut(node):
        mend(node)
        said.append(f"{node.name}: network mended")
    pid = dockerd_pid(node)
    if pid is not None and proc_state(pid) == "T":
        kill(pid, signal.SIGCONT)
        said.append(f"{node.name}: dockerd resumed")
    elif pid is None and os.path.exists(node.netns_path):
        start_dockerd(tb, node)
        said.append(f"{node.name}: dockerd started")
    return said


def wait_dockerd(node: Node, timeout: float = 30) -> None:
    """Until the node's engine answers its API (after a start or a resume)."""
    from . import docker_api

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(node.docker_socket) and docker_api.ping(node.docker_socket):
            return
        time.sleep(0.1)
    raise TestbedError(f"{node.name}: dockerd does not answer within {timeout:.0f} s")
