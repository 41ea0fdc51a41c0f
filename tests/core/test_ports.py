"""What ``up`` says when a rank's port is taken (``core/ports.py``; the check itself runs on real
sockets: tests/backend/test_local_up.py, tests/ui/test_console_live.py, tests/realparts/test_ports.py)."""

from __future__ import annotations

from sparktui.core.ports import BusyPort, PortsInUse


def test_the_sentence_names_each_node_port_and_rank() -> None:
    err = PortsInUse([BusyPort("node1", 1, 30000), BusyPort("node3", 3, 30000)])
    assert str(err) == ("node1: port 30000 (rank 1's API port) is already in use; node3: port 30000 "
                        "(rank 3's API port) is already in use; nothing was started (stop what "
                        "listens there, or give the recipe another port)")
