"""``core/ports.py`` reads this machine's own kernel tables while the test holds real sockets."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sparktui.core.ports import PROC_NET, BusyPort, PortsInUse, listening

pytestmark = pytest.mark.skipif(not Path(PROC_NET[0]).exists(), reason="no /proc/net/tcp: not Linux")


def tables() -> str:
    return "".join(Path(p).read_text() for p in PROC_NET if Path(p).exists())


def test_listening_sockets_are_found_and_others_are_not() -> None:
    with socket.socket() as v4, socket.socket() as bound_only, socket.socket(socket.AF_INET6) as v6:
        v4.bind(("127.0.0.1", 0))
        v4.listen()
        bound_only.bind(("127.0.0.1", 0))  # bound, not listening: "CLOSE" in the table
        v6.bind(("::1", 0))
        v6.listen()
        found = listening(tables())
        assert v4.getsockname()[1] in found and v6.getsockname()[1] in found
        assert bound_only.getsockname()[1] not in found
        port = v4.getsockname()[1]
    assert port not in listening(tables())  # closed


def test_the_sentence_names_each_node_port_and_rank() -> None:
    err = PortsInUse([BusyPort("node1", 1, 30000), BusyPort("node3", 3, 30000)])
    assert str(err) == ("node1: port 30000 (rank 1's API port) is already in use; node3: port 30000 "
                        "(rank 3's API port) is already in use; nothing was started (stop what "
                        "listens there, or give the recipe another port)")


def test_text_that_is_no_table_finds_nothing() -> None:
    assert listening("") == set() and listening("garbage\n  0: zz:zz 00000000:0000 0A\n") == set()
