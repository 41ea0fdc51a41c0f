"""The runtime registry: a cluster's ``kind`` -> the factory that builds its runtime, and the
check that stops a command before it connects (SSH keys and known hosts for ``ssh``).

The other half of the registry is pure (``core.kinds``: what the plan and the cluster file's
checks need to know of a kind); ``register`` fills both, so a new runtime (Slurm, or a test's
own) is one module and one ``register`` call, and nothing else in sparktui changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sparktui.backend.runtimes.base import Runtime
from sparktui.backend.runtimes.local import LocalProcesses
from sparktui.backend.runtimes.ssh import SshDocker
from sparktui.backend.sshaccess import access_problems as ssh_access_problems
from sparktui.core.cluster import Cluster, Node
from sparktui.core.kinds import KINDS, LOCAL, SSH, Kind, add_kind, remove_kind
from sparktui.core.problems import Problem
from sparktui.core.slurmjob import SLURM

Factory = Callable[[Cluster, list[Node], Path], Runtime]
"""``(cluster, the nodes of the plan's ranks, state root) -> Runtime``."""
AccessCheck = Callable[[Cluster, Sequence[Node]], list[Problem]]


@dataclass(frozen=True)
class Entry:
    kind: Kind
    build: Factory
    access: AccessCheck | None = None
    """Problems that stop a command before it connects (exit 2 with the key to fix)."""


RUNTIMES: dict[str, Entry] = {}


def register(kind: Kind, build: Factory, access: AccessCheck | None = None) -> None:
    """Make ``kind`` a cluster kind that plans, validates and runs (``build`` makes its
    runtime)."""
    add_kind(kind)
    RUNTIMES[kind.name] = Entry(kind, build, access)


def unregister(name: str) -> None:
    """Forget a runtime ``register`` added (a test's, once the test is done)."""
    if name not in (SSH, LOCAL, SLURM):
        RUNTIMES.pop(name, None)
        remove_kind(name)


def runtime_for(cluster: Cluster, nodes: list[Node], state_root: Path) -> Runtime:
    """The runtime of ``cluster``'s kind over ``nodes`` (the plan's ranks' nodes)."""
    return RUNTIMES[cluster.kind].build(cluster, nodes, state_root)


def access_problems(cluster: Cluster, nodes: Sequence[Node]) -> list[Problem]:
    """What stops ``cluster``'s runtime from reaching ``nodes``, said before connecting."""
    check = RUNTIMES[cluster.kind].access
    return check(cluster, nodes) if check is not None else []


register(KINDS[SSH], SshDocker, ssh_access_problems)
register(KINDS[LOCAL], LocalProcesses)


def _slurm(cluster: Cluster, nodes: list[Node], state_root: Path) -> Runtime:
    # loaded for a Slurm cluster only: 15 ms of every other command's start
    from sparktui.backend.runtimes.slurm import SlurmDocker

    return SlurmDocker(cluster, nodes, state_root)


def _slurm_access(cluster: Cluster, nodes: Sequence[Node]) -> list[Problem]:
    from sparktui.backend.runtimes.slurm import access_problems

    return access_problems(cluster, nodes)


register(KINDS[SLURM], _slurm, _slurm_access)
