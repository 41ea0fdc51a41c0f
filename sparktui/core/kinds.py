"""The kinds of cluster, as the pure layers see them: the half of the runtime registry that
plans, validation and lints read (``backend/runtimes`` holds the other half: the factory that
builds each kind's runtime and the capabilities it declares).

A kind's traits are facts about where its ranks run, never a test of its name: code outside
the registry asks ``cluster.traits.on_this_machine``, not whether the kind is ``local``, so a
runtime added later (Slurm, or a test's own) is planned and validated with no change here but
its entry (``add_kind``, called by ``backend.runtimes.register``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparktui.core.slurmjob import SLURM, SlurmSettings, views

if TYPE_CHECKING:
    from pydantic import BaseModel

SSH = "ssh"
LOCAL = "local"


@dataclass(frozen=True)
class Kind:
    """What the plan, the cluster file's checks and the views need to know of a runtime."""

    name: str
    shown: str = ""
    """Said after the cluster's name in a plan view (``local processes``); empty: nothing."""
    on_this_machine: bool = False
    """Every node is this machine: ranks listen on the loopback, each on its own port (the
    recipe's port + rank), and every node's folders are one disk."""
    node_shell: bool = True
    """Commands reach each node's login shell: the values they carry must hold only the safe
    characters of ``core.nodevalues``, and the HF cache folder must be given (nothing can
    expand ``~`` on a node before sparktui connects)."""
    table: type[BaseModel] | None = None
    """The cluster file's table of this kind's own, named as the kind (``[slurm]``): required
    with this kind, an unknown key with any other; read into ``Cluster.settings``."""
    views: Callable[[Any, Any], list[tuple[str, str]]] | None = None
    """``(Plan, Cluster) -> [(title, text)]`` (typed loosely: the plan and the cluster import
    this module): what the plan view shows of how this kind runs
    the plan, beside the ranks' containers (Slurm: the job script and each rank's step)."""


KINDS: dict[str, Kind] = {
    SSH: Kind(SSH),
    LOCAL: Kind(LOCAL, shown="local processes", on_this_machine=True, node_shell=False),
    SLURM: Kind(SLURM, shown="Slurm", table=SlurmSettings, views=views),
}


def add_kind(kind: Kind) -> None:
    """Make ``kind`` a value a cluster file's ``kind`` may take (``backend.runtimes.register``)."""
    KINDS[kind.name] = kind


def remove_kind(name: str) -> None:
    """Forget a kind added by ``add_kind`` (a test's runtime, once the test is done)."""
    if name not in (SSH, LOCAL, SLURM):
        KINDS.pop(name, None)


def kind_of(name: str) -> Kind:
    """The traits of a cluster's ``kind`` (validated to be one of ``KINDS``)."""
    return KINDS[name]
