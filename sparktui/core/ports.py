"""Which TCP ports a node already listens on, read from its ``/proc/net/tcp`` and ``tcp6``.

Ranks run with the host's network, so a port something else listens on fails the rank at
bind, after the others have started: ``up`` looks first (``Orchestrator.check_ports``). The
kernel's tables list every listener of the node's network namespace, on any address, where a
trial connection to the loopback address would miss one bound to the fabric's address only.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.core.errors import SparkError

PROC_NET = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN = "0A"  # the socket state column of a listening socket (include/net/tcp_states.h)


def listening(tables: str) -> set[int]:
    """The ports in LISTEN state in the text of ``/proc/net/tcp`` and ``tcp6`` (their lines:
    ``sl local_address rem_address st ...``, the local address ``<hex ip>:<hex port>``)."""
    ports: set[int] = set()
    for line in tables.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[3] != LISTEN:
            continue
        _address, sep, port = fields[1].rpartition(":")
        if sep:
            try:
                ports.add(int(port, 16))
            except ValueError:
                continue
    return ports


@dataclass(frozen=True)
class BusyPort:
    """A port a rank needs that something on its node already listens on."""

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
