"""A rank's API port that something on its node already answers on: what ``up`` refuses.

Ranks run with the host's network, so a port a server on the node already holds fails the rank
at bind, after the others have started. ``Orchestrator.check_ports`` asks each node, over the
connection ``up`` holds; this module holds what it found and the sentence that says it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.core.errors import SparkError


@dataclass(frozen=True)
class BusyPort:
    """A port a rank needs that a server on its node already answers on."""

    node: str
    rank: int
    port: int

    def sentence(self) -> str:
        return f"{self.node}: port {self.port} (rank {self.rank}'s API port) is already in use"


class PortsInUse(SparkError):
    """``up`` refused before starting anything: a rank's port is taken on its node."""

    def __init__(self, busy: list[BusyPort]) -> None:
        self.busy = busy
        super().__init__("; ".join(b.sentence() for b in busy) + "; nothing was started (stop "
                         "what listens there, or give the recipe another port)")
