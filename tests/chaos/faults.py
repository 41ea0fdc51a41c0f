"""The soak's table of faults: each is injected into the running group, held for a time drawn
from its range and mended (a killed container or process needs no mending: the watchdog or the
operator brings it back). Each says what an operator then sees, which ``test_chaos`` holds
it to fault by fault.

- ``kill-rank``: a rank's container SIGKILLed; the group falls, the watchdog restarts it.
- ``sshd-restart``: a node's sshd and every SSH connection to it killed, started again; the
  follower reconnects and resumes from its cursor.
- ``net-cut``: every packet to and from a node dropped for a while (a partition, no refusal).
- ``dockerd-pause``: a node's dockerd SIGSTOPped, then SIGCONTed (an engine that answers nothing).
- ``dockerd-kill``: a node's dockerd SIGKILLed and started again (Docker stops its containers
  when it starts without them: the group falls, the watchdog restarts it).
- ``watch-kill``: the ``sparktui watch`` process SIGKILLed (a laptop asleep, an OOM kill) and
  started again; it attaches and catches up what was written meanwhile.
- ``cli-restart``: while the watch is down, ``sparktui restart`` of one rank or the group from
  the command line; then the watch again.
- ``disk-fill``: the filesystem the run's files live on (the soak's own tmpfs) filled to the
  last byte for a while; the follower says so and reads the lines again from the last one
  written once there is room.

On the Slurm runtime (``SLURM_TABLE``: a node's network is Slurm's own, not cut there) the
ranks are steps of one allocation, reached through the login node, and two faults join:

- ``slurmd-kill``: a node's slurmd SIGKILLed and started again (its steps go on, as when the
  daemon crashes): nothing fails, the same steps and job.
- ``node-down``: a node set DOWN (``scontrol``), then RESUMEd: Slurm ends the allocation; its
  rank is failed first ("its place was lost"), and the watchdog asks for the group again,
  queued until the node is back, then ready in a new job.

and ``sshd-restart`` restarts the login node's sshd, the one sparktui talks to.
"""

from __future__ import annotations

import contextlib
import errno
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sparktui_testbed as tbm
from sparktui.core.dockerview import short_id
from sparktui_testbed import faults as tbf

if TYPE_CHECKING:
    from tests.chaos.soak import Soak


@dataclass(frozen=True)
class Fault:
    """A fault of the table: its name and how long it is held (seconds) in CI and by hand."""

    kind: str
    ci_hold: tuple[float, float]
    long_hold: tuple[float, float]

    def hold(self, rnd: random.Random, long: bool) -> float:
        lo, hi = self.long_hold if long else self.ci_hold
        return round(rnd.uniform(lo, hi), 2)


KILL_RANK = Fault("kill-rank", (0, 0), (0, 0))
SSHD_RESTART = Fault("sshd-restart", (0.2, 1.5), (0.2, 5))
NET_CUT = Fault("net-cut", (2, 6), (5, 40))
DOCKERD_PAUSE = Fault("dockerd-pause", (1, 4), (2, 15))
DOCKERD_KILL = Fault("dockerd-kill", (0.5, 2), (1, 8))
WATCH_KILL = Fault("watch-kill", (0, 2), (0, 10))
CLI_RESTART = Fault("cli-restart", (0, 0), (0, 0))
DISK_FILL = Fault("disk-fill", (1, 5), (2, 30))
SLURMD_KILL = Fault("slurmd-kill", (0.5, 3), (1, 20))
NODE_DOWN = Fault("node-down", (1, 4), (2, 20))

TABLE: tuple[Fault, ...] = (KILL_RANK, SSHD_RESTART, NET_CUT, DOCKERD_PAUSE, DOCKERD_KILL,
                            WATCH_KILL, CLI_RESTART, DISK_FILL)
SLURM_TABLE: tuple[Fault, ...] = (KILL_RANK, SSHD_RESTART, DOCKERD_PAUSE, DOCKERD_KILL,
                                  WATCH_KILL, CLI_RESTART, DISK_FILL, SLURMD_KILL, NODE_DOWN)
BY_KIND = {f.kind: f for f in (*TABLE, *SLURM_TABLE)}


def inject(soak: Soak, fault: Fault, rnd: random.Random, hold: float) -> str:
    """Inject the fault, hold it, mend it; what was hit, said."""
    node = rnd.choice(soak.testbed.nodes)
    match fault.kind:
        case "kill-rank":
            rank = rnd.randrange(soak.world)
            running = [c for c in soak.truth.all()[0].get(rank, []) if c.running]
            if not running:
                return f"rank {rank}: no running container (nothing killed)"
            c = running[0]
            soak.truth.kill(c)
            return f"rank {rank} container {short_id(c.id)} on {c.node}"
        case "sshd-restart":
            which = "login" if soak.runtime == "slurm" else node.name  # the one sparktui reaches
            tbm.stop_sshd(soak.testbed.state_dir, which)
            soak.sleep(hold)
            tbm.start_sshd(soak.testbed.state_dir, which)
            return which
        case "slurmd-kill":
            sd = soak.testbed.state_dir
            return held(soak, hold, node.name, lambda: tbm.stop_slurmd(sd, node.name),
                        lambda: tbm.start_slurmd(sd, node.name))
        case "node-down":
            return held(soak, hold, node.name, lambda: node_down(soak, node.name),
                        lambda: resume(soak, node.name))
        case "net-cut":
            return held(soak, hold, node.name, lambda: tbf.cut(node), lambda: tbf.mend(node))
        case "dockerd-pause":
            return held(soak, hold, node.name, lambda: tbf.pause_dockerd(node),
                        lambda: tbf.resume_dockerd(node))
        case "dockerd-kill":
            def again() -> None:
                tbf.start_dockerd(soak.testbed, node)
                tbf.wait_dockerd(node)
            return held(soak, hold, node.name, lambda: tbf.kill_dockerd(node), again)
        case "watch-kill":
            soak.watch.kill()
            soak.sleep(hold)
            soak.watch.start()
            return "watch"
        case "cli-restart":
            soak.watch.kill()
            group = rnd.random() < 0.5
            rank = rnd.randrange(soak.world)
            words = ("restart", "--group") if group else ("restart", "--rank", str(rank))
            res = soak.cli(*words)
            soak.said(res)
            soak.watch.start()
            what = "the group" if group else f"rank {rank}"
            return f"{what}: exit {res.returncode}" + (f" ({res.stderr.strip()[-200:]})"
                                                       if res.returncode else "")
        case "disk-fill":
            filled = fill(soak.state_top)
            try:
                soak.sleep(hold)
            finally:
                (soak.state_top / FILLER).unlink()
            return f"{filled / 2**20:.0f} MiB filled"
    raise AssertionError(f"no such fault: {fault.kind}")


def held(soak: Soak, hold: float, target: str, hit: Callable[[], object],
         mend: Callable[[], object]) -> str:
    """``hit``, held for ``hold`` seconds, then ``mend`` whatever happened meanwhile."""
    hit()
    try:
        soak.sleep(hold)
    finally:
        mend()
    return target


def node_down(soak: Soak, name: str) -> None:
    tbm.set_slurm_state(soak.testbed.state_dir, name, "DOWN", "sparktui chaos: node down")


def resume(soak: Soak, name: str) -> None:
    """The node back in service, whatever a fault left of it (a DOWN state, a stopped slurmd)."""
    sd = soak.testbed.state_dir
    state = tbm.start_slurmd(sd, name, wait=False)
    if state.rstrip("*~#").startswith(("down", "drain", "fail")):
        with contextlib.suppress(tbm.TestbedError):  # back already as it registered
            tbm.set_slurm_state(sd, name, "RESUME")


FILLER = ".chaos-filler"


def fill(top: Path) -> int:
    """Fill the filesystem of ``top`` to the last byte (a file of zeros there); its size."""
    chunk = bytes(1 << 20)
    size = 0
    with open(top / FILLER, "wb", buffering=0) as f:
        for step in (chunk, bytes(4096), b"\0"):
            while True:
                try:
                    size += f.write(step) or 0
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return size
