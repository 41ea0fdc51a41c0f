"""A minimal Docker Engine API client over a node's unix socket, standard library only.

The testbed must run before (and without) the docker SDK being installed, and it talks to
several engines at once, so it speaks HTTP to each node's socket directly: ping, image id,
info, image load, force-removing containers. `cli` runs the docker CLI against one node for
the checks that want a real `docker run`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
from typing import Any

from .config import DAEMON_PATH, IMAGE, T_LOAD, T_RUN
from .layout import Node, Paths
from .runner import TestbedError, daemon_env, run


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def request(
    sock: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, bytes]:
    conn = _UnixHTTPConnection(sock, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def ping(sock: str, timeout: float = 2.0) -> bool:
    try:
        status, body = request(sock, "GET", "/_ping", timeout=timeout)
    except OSError:
        return False
    return status == 200 and body.strip() == b"OK"


def image_id(sock: str, image: str = IMAGE) -> str | None:
    try:
        status, body = request(sock, "GET", f"/images/{image}/json", timeout=10)
    except OSError:
        return None
    if status != 200:
        return None
    return str(json.loads(body).get("Id") or "") or None


def info(sock: str) -> dict[str, Any]:
    status, body = request(sock, "GET", "/info", timeout=10)
    if status != 200:
        raise TestbedError(f"GET /info -> {status}: {body[:300]!r}")
    return dict(json.loads(body))


def load(sock: str, archive: str) -> None:
    size = os.path.getsize(archive)
    with open(archive, "rb") as f:
        status, body = request(
            sock,
            "POST",
            "/images/load?quiet=1",
            body=f,
            headers={"Content-Type": "application/x-tar", "Content-Length": str(size)},
            timeout=T_LOAD,
        )
    if status != 200:
        raise TestbedError(f"POST /images/load -> {status}: {body[:500]!r}")
    for line in body.splitlines():
        with contextlib.suppress(ValueError):
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("error"):
                raise TestbedError(f"docker load: {msg['error']}")


def remove_containers(node: Node) -> None:
    """Force-remove the node's running containers (best effort; dockerd is stopped next)."""
    try:
        status, body = request(node.docker_socket, "GET", "/containers/json", timeout=5)
        ids = [c["Id"] for c in json.loads(body)] if status == 200 else []
    except (OSError, ValueError, KeyError, TypeError):
        return

    def rm(cid: str) -> None:
        with contextlib.suppress(OSError):
            request(node.docker_socket, "DELETE", f"/containers/{cid}?force=1", timeout=10)

    if ids:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(ids))) as ex:
            list(ex.map(rm, ids))


def cli(
    paths: Paths, node: Node, *args: str, timeout: float = T_RUN, check: bool = True, what: str = "docker"
) -> subprocess.CompletedProcess[bytes]:
    docker = shutil.which("docker", path=DAEMON_PATH)
    if not docker:
        raise TestbedError("docker CLI not found")
    env = daemon_env()
    env["DOCKER_CONFIG"] = str(paths.docker_cli)
    return run(
        [docker, "-H", f"unix://{node.docker_socket}", *args],
        what=what,
        timeout=timeout,
        check=check,
        env=env,
    )
