"""A port taken on one node of the real 4-node test cluster: ``up`` asks every node, over the SSH
connection it holds, whether a server answers on each rank's API port, and refuses before any
container starts, naming the node, the port and the rank. A server listening on the node's
fabric address alone counts too (one on its loopback: tests/backend/test_local_up.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.realparts.test_image_sync import containers
from tests.runner import Cli, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

DEMO = ROOT / "recipes" / "demo-tp4"
API_PORT = 30000  # the demo recipe's port; the test cluster's nodes have no port offset
LISTEN = ("import socket, sys, time; s = socket.socket(); s.bind((sys.argv[1], int(sys.argv[2]))); "
          "s.listen(); print('listening', flush=True); time.sleep(120)")


@pytest.fixture
def cli(testbed: Any, tmp_path: Path) -> Iterator[Cli]:
    run = sparktui_cli(testbed.cluster_file, state_env(tmp_path / "state"), DEMO)
    yield run
    run("down")


def listen_on(node: Any, address: str) -> subprocess.Popen[str]:
    """A process in the node's network namespace listening on ``address``:``API_PORT``."""
    proc = subprocess.Popen(["nsenter", f"--net={node.netns_path}", sys.executable, "-c", LISTEN,
                             address, str(API_PORT)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    return proc


def test_up_refuses_a_port_taken_on_a_node_and_starts_nothing(testbed: Any, cli: Cli) -> None:
    node = testbed.nodes[2]
    holder = listen_on(node, node.ip)  # the node's own address, not its loopback
    try:
        up = cli("up", "--wait")
        assert up.returncode == 1
        assert (f"{node.name}: port {API_PORT} (rank 2's API port) is already in use; nothing was "
                "started" in up.stderr), up.stderr
        assert up.stderr.count("already in use") == 1  # the other three nodes' ports are free
        assert containers(testbed) == []
    finally:
        holder.kill()
        holder.wait()
    up = cli("up", "--wait")  # the port is free again
    assert up.returncode == 0 and "ready: 4 ranks" in up.stdout, up.stderr
