"""The local cluster end to end as vLLM: `sparktui up recipes/demo-vllm-tp4 --wait` on this
machine. Rank 0 serves the API; ranks 1-3 run --headless, open no port, and are ready when they
run and rank 0 is ready."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runner import Cli, local_cli

RECIPE = "recipes/demo-vllm-tp4"



@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    yield from local_cli(tmp_path, RECIPE)


def refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_demo_vllm_tp4_reaches_ready_on_local_cluster(cli: Cli) -> None:
    up = cli("up", RECIPE, "--wait")
    assert up.returncode == 0, up.stderr
    assert "ready: 4 ranks, 12/12 checks passed" in up.stdout  # 11 and rank 0's args
    status = json.loads(cli("status", RECIPE, "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
    assert status["ranks"][0]["health"] == 200
    assert all(r["checks"]["failed"] == 0 and r["checks"]["pending"] == 0 for r in status["ranks"])
    assert not refused(8000)
    assert all(refused(8000 + r) for r in (1, 2, 3))  # headless: no port (local node r: 8000 + r)
    smoke = cli("smoke", RECIPE)
    assert smoke.returncode == 0, smoke.stderr
    assert re.search(r"smoke ok: demo-vllm-tp4: \d+ tokens", smoke.stdout)
    head = cli("logs", RECIPE, "--rank", "0", "--grep", "Application startup complete")
    assert head.stdout.startswith("r0 ") and "Application startup complete." in head.stdout
    worker = cli("logs", RECIPE, "--rank", "3", "--grep", "headless worker ready")
    assert "rank 3 of 4 (--headless: no HTTP port)" in worker.stdout
    plan = json.loads(cli("plan", RECIPE, "--json").stdout)
    assert [r["container"]["command"][-1] == "--headless" for r in plan["ranks"]] == \
        [False, True, True, True]
    down = cli("down", RECIPE)
    assert down.returncode == 0
    status = json.loads(cli("status", RECIPE, "--json").stdout)
    assert all(r["container_id"] is None for r in status["ranks"])
