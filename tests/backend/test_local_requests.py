"""One request cannot fail a rank: on the local cluster (real demo processes), requests whose
path holds the recipe's must_not_show line and the engines' fatal lines leave every rank ready
and every check passed, while the access lines stay in the run's files; and the ranks listen on
the loopback only. Run inside ``unshare -n`` (fixed ports)."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path

from tests.backend.test_local_up import cli
from tests.runner import Cli, listening, raw_get, socket_inodes

__all__ = ["cli"]  # the fixture: a state folder of the test's own, demo-tp4 down after

RECIPE = "recipes/demo-tp4"
PORTS = [30000 + rank for rank in range(4)]  # the recipe's port + each local node's offset
TB = "Traceback (most recent call last):"


def encoded_request(port: int, target: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", target)
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_request_holding_fatal_text_leaves_every_rank_ready(cli: Cli, tmp_path: Path) -> None:
    up = cli("up", RECIPE, "--wait")
    assert up.returncode == 0, up.stderr

    # every socket the demo ranks listen on (API, health, rendezvous), whatever else runs here
    ranks = socket_inodes(b"sparktui.demo.engine")
    bound = listening(inodes=ranks)
    assert set(PORTS) <= set(bound)
    assert set(bound.values()) == {"0100007F"}, bound  # 127.0.0.1, not 0.0.0.0 (00000000)
    assert listening("/proc/net/tcp6", inodes=ranks) == {}

    for port in PORTS:  # every rank: the head's API and the workers' health servers
        assert raw_get(port, f"/x?{TB}").startswith(b"HTTP/1.1 400 ")  # spaces: a bad line
        for target in ("/EngineDeadError", "/NCCL%20error", "/x?Traceback%20(most%20recent%20call%20last):"):
            assert encoded_request(port, target) == 404
    assert encoded_request(PORTS[0], "/v1/models?The%20server%20is%20fired%20up") == 200

    logs = sorted((tmp_path / "state").rglob("r[0-3].log"))
    deadline = time.monotonic() + 10
    status = {}
    while time.monotonic() < deadline:
        status = json.loads(cli("status", RECIPE, "--json").stdout)  # catches up with the ranks' logs
        if all(f'"GET /x?{TB} HTTP/1.1" 400 Bad Request' in log.read_text() for log in logs):
            break
        time.sleep(0.2)
    assert len(logs) == 4
    for log in logs:
        text = log.read_text()
        assert f'"GET /x?{TB} HTTP/1.1" 400 Bad Request' in text, text[-2000:]
        assert '"GET /EngineDeadError HTTP/1.1" 404 Not Found' in text
        assert "Bad request syntax" not in text  # the demo quotes no request in its own lines

    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4, status["ranks"]
    for r in status["ranks"]:
        assert r["checks"]["failed"] == 0 and r["checks"]["pending"] == 0, r
