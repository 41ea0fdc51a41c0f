"""Proof that a freshly built testbed works, checked from the outside as the tests will use it.

After a cold `up`, each node is reached over ssh with strict host key checking (and must see
its own /home and docker socket, so the private mounts are in place), runs a container of the
demo image, and two nodes' containers talk TCP over the bridge. A failure here names the node
and the check, instead of surfacing later as a puzzling test failure.
"""

from __future__ import annotations

import os
import shutil

from . import docker_api
from .config import DAEMON_PATH, IMAGE, VERIFY_PORT
from .layout import Node, Paths, Testbed
from .runner import TestbedError, parallel, run, step


def ssh_argv(ssh: str, identity: str, known_hosts: str, ip: str, command: str) -> list[str]:
    """OpenSSH to ``root@ip`` as a user's would go: no config, this key only, no prompt, the
    host key checked against ``known_hosts`` alone."""
    return [ssh, "-F", "/dev/null", "-i", identity, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5", f"root@{ip}", command]


def verify_testbed(tb: Testbed, paths: Paths) -> None:
    """Check every node from the root namespace: ssh with strict host keys, own /home and
    docker socket, a container run, and container-to-container TCP between nodes."""
    ssh = shutil.which("ssh", path=DAEMON_PATH)

    def check_node(node: Node) -> None:
        if ssh:
            with step(node.name, "verify ssh"):
                cp = run(
                    ssh_argv(ssh, tb.identity, tb.known_hosts, node.ip,
                             "stat -c %i /home /var/run/docker.sock"),
                    what="ssh",
                    timeout=20,
                )
                got = cp.stdout.decode().split()
                want = [str(os.stat(node.home).st_ino), str(os.stat(node.docker_socket).st_ino)]
                if got != want:
                    raise TestbedError(
                        f"node sees /home and docker.sock as inodes {got}, "
                        f"expected {want} (private mounts not in place)"
                    )
        with step(node.name, "verify docker run"):
            cp = docker_api.cli(
                paths,
                node,
                "run",
                "--rm",
                "--network",
                "host",
                IMAGE,
                "python3",
                "-c",
                "import json, asyncio, http.server, hashlib, ssl; print(1)",
                what="docker run",
            )
            if cp.stdout.decode().strip() != "1":
                raise TestbedError(f"unexpected output {cp.stdout!r} {cp.stderr!r}")

    parallel(tb.nodes, check_node)
    if len(tb.nodes) >= 2:
        _verify_cross_node(tb, paths, tb.nodes[0], tb.nodes[1])


def _verify_cross_node(tb: Testbed, paths: Paths, a: Node, b: Node) -> None:
    name = "sptb-verify-listen"
    server = (
        "import socket\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(({a.ip!r}, {VERIFY_PORT}))\n"
        "s.listen(1)\n"
        "s.settimeout(30)\n"
        "c, _ = s.accept()\n"
        "c.sendall(b'pong')\n"
        "c.close()\n"
    )
    client = (
        "import socket, time\n"
        "deadline = time.time() + 20\n"
        "while True:\n"
        "    try:\n"
        f"        c = socket.create_connection(({a.ip!r}, {VERIFY_PORT}), timeout=3)\n"
        "        break\n"
        "    except OSError:\n"
        "        if time.time() > deadline: raise\n"
        "        time.sleep(0.1)\n"
        "print(c.recv(16).decode())\n"
    )
    with step(f"{a.name}->{b.name}", "verify container TCP between nodes"):
        docker_api.cli(paths, a, "rm", "-f", name, check=False, what="docker rm")
        try:
            docker_api.cli(
                paths,
                a,
                "run",
                "-d",
                "--rm",
                "--network",
                "host",
                "--name",
                name,
                IMAGE,
                "python3",
                "-c",
                server,
                what="docker run (listener)",
            )
            cp = docker_api.cli(
                paths,
                b,
                "run",
                "--rm",
                "--network",
                "host",
                IMAGE,
                "python3",
                "-c",
                client,
                what="docker run (client)",
            )
            if cp.stdout.decode().strip() != "pong":
                raise TestbedError(f"client got {cp.stdout!r} {cp.stderr!r}")
        finally:
            docker_api.cli(paths, a, "rm", "-f", name, check=False, what="docker rm")
