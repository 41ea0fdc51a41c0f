"""The Slurm controls of a running testbed, by state dir: client commands on the login node as
a given user, node states, a node's slurmd stopped and started, a node set DOWN or RESUMEd,
Slurm taken off. The tests of sparktui's Slurm runtime drive the cluster's failures with these.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence

from . import slurm
from .cluster import load
from .layout import Paths, Slurm, Testbed, locked
from .runner import TestbedError


def _with_slurm(state_dir: str | os.PathLike[str] | None) -> tuple[Paths, Testbed, Slurm]:
    paths = Paths(state_dir)
    tb = load(paths.sd)
    if tb is None or tb.slurm is None:
        raise TestbedError(f"no testbed with Slurm in {paths.sd} (run `python -m sparktui_testbed up` first)")
    return paths, tb, tb.slurm


def slurm_command(
    state_dir: str | os.PathLike[str] | None,
    argv: Sequence[str],
    *,
    user: str = "root",
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client (sbatch, srun, squeue, scancel, scontrol, sinfo, ...) on the login
    node as ``user`` (root, or SECOND_USER for another operator's jobs), in the shared folder,
    with SLURM_CONF set as in an SSH session there. Its exit code is the caller's to judge."""
    _, _, s = _with_slurm(state_dir)
    return slurm.client(s, argv, user=user, timeout=timeout)


def slurm_states(state_dir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Each node's Slurm state as sinfo says it (``idle``, ``allocated``, ``down``, ``idle*``...)."""
    _, _, s = _with_slurm(state_dir)
    return slurm.node_states(s)


def stop_slurmd(
    state_dir: str | os.PathLike[str] | None,
    node: str | int,
    *,
    down: bool = False,
    steps: bool = False,
    lost: bool = False,
    reason: str = "sparktui testbed: slurmd stopped",
) -> None:
    """Kill the node's slurmd (its running steps go on, as when a slurmd crashes; steps=True
    kills them too; lost=True kills them and the node's containers at once with SIGKILL, as
    a node that loses power); down=True then sets the node DOWN, as an operator or
    slurmctld's timeout would have it."""
    paths, tb, s = _with_slurm(state_dir)
    nd = tb.node(node)
    with locked(paths):
        slurm.stop_slurmd(s, nd, jobs=steps, lost=lost)
        if down:
            slurm.set_state(s, nd, "DOWN", reason)


def start_slurmd(state_dir: str | os.PathLike[str] | None, node: str | int, *, wait: bool = True) -> str:
    """Start the node's slurmd again (no-op when it runs). A DOWN node comes back as it
    registers (ReturnToService=2); wait=True waits for that and returns its state."""
    paths, tb, s = _with_slurm(state_dir)
    nd = tb.node(node)
    with locked(paths):
        slurm.start_slurmd(s, nd)
    if not wait:
        return slurm.node_states(s).get(nd.name, "")
    return slurm.wait_nodes(s, [nd.name], slurm.responding)[nd.name]


def set_slurm_state(
    state_dir: str | os.PathLike[str] | None,
    node: str | int,
    state: str,
    reason: str = "sparktui testbed",
) -> None:
    """``scontrol update NodeName=<node> State=<state>`` (DOWN, DRAIN, RESUME, ...)."""
    _, tb, s = _with_slurm(state_dir)
    slurm.set_state(s, tb.node(node), state, reason)


def stop_slurm(state_dir: str | os.PathLike[str] | None = None) -> None:
    """Take Slurm (and the login node) off the running testbed; the next `up` starts it again."""
    paths = Paths(state_dir)
    tb = load(paths.sd)
    if tb is None:
        raise TestbedError(f"no testbed in {paths.sd}")
    with locked(paths):
        problems = slurm.stop(paths, tb.nodes)
        tb.slurm = None
        paths.info.write_text(json.dumps(tb.to_json(), indent=2) + "\n")
    if problems:
        raise TestbedError("stop-slurm left something behind:\n  " + "\n  ".join(problems))
