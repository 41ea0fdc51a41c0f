"""The local cluster end to end: `sparktui up recipes/demo-tp4 --wait` on this machine."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT
from tests.runner import Cli, local_env, sparktui_run


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    run = sparktui_run(local_env(tmp_path))
    yield run
    run("down", "recipes/demo-tp4")


def test_demo_tp4_reaches_ready_on_local_cluster(cli) -> None:  # type: ignore[no-untyped-def]
    up = cli("up", "recipes/demo-tp4", "--wait")
    assert up.returncode == 0, up.stderr
    assert "ready: 4 ranks" in up.stdout
    status = json.loads(cli("status", "recipes/demo-tp4", "--json").stdout)
    assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
    assert [r["health"] for r in status["ranks"]] == [200] * 4
    for r in status["ranks"]:
        assert r["checks"]["failed"] == 0 and r["checks"]["pending"] == 0
    smoke = cli("smoke", "recipes/demo-tp4")
    assert smoke.returncode == 0, smoke.stderr
    assert re.search(r"smoke ok: demo-tp4: \d+ tokens, first after \d+ ms, decode [\d.]+ tok/s", smoke.stdout)
    nodes = json.loads(cli("status", "recipes/demo-tp4", "--json").stdout)["nodes"]
    assert [n["node"] for n in nodes] == ["local0", "local1", "local2", "local3"]
    assert all(n["status"] == "ok" and n["sample"]["mem_available"] > 0 for n in nodes)
    logs = cli("logs", "recipes/demo-tp4", "--rank", "0", "--grep", "fired up")
    assert logs.stdout.startswith("r0 ") and "The server is fired up and ready to roll!" in logs.stdout
    down = cli("down", "recipes/demo-tp4")
    assert down.returncode == 0
    status = json.loads(cli("status", "recipes/demo-tp4", "--json").stdout)
    assert all(r["container_id"] is None for r in status["ranks"])


def test_smoke_on_a_dead_endpoint_is_one_line(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("smoke", "recipes/demo-tp4")
    assert res.returncode == 1
    assert res.stderr.strip().count("\n") == 0
    assert "smoke: cannot reach http://127.0.0.1:30000/v1/chat/completions (connection refused" in res.stderr


def _first_tokens_seen() -> float:
    """How many requests the head's /metrics saw a first token of (demo-tp4: --enable-metrics)."""
    with urllib.request.urlopen("http://127.0.0.1:30000/metrics", timeout=10) as resp:
        body = resp.read().decode()
    [family] = [f for f in text_string_to_metric_families(body)
                if f.name == "sglang:time_to_first_token_seconds"]
    [count] = [s.value for s in family.samples if s.name.endswith("_count")]
    return float(count)


def test_smoke_sends_n_requests_c_at_once(cli) -> None:  # type: ignore[no-untyped-def]
    up = cli("up", "recipes/demo-tp4", "--wait")
    assert up.returncode == 0, up.stderr
    assert _first_tokens_seen() == 0  # the counters start with the rank
    smoke = cli("smoke", "recipes/demo-tp4", "--n", "3", "--concurrency", "2", "--max-tokens", "8")
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    said = smoke.stdout.splitlines()
    assert sorted(line[:6] for line in said[:3]) == ["[1/3] ", "[2/3] ", "[3/3] "], said
    for line in said[:3]:
        assert re.fullmatch(r"\[\d/3\] smoke ok: demo-tp4: 8 tokens, first after \d+ ms, decode [\d.]+ tok/s "
                            r"\([\d.]+ s in all\)", line), line
    assert re.fullmatch(r"smoke ok: 3 requests, p50 first token \d+ ms, p95 first token \d+ ms, "
                        r"decode p50 [\d.]+ tok/s, 24 tokens in [\d.]+ s", said[3]), said
    assert len(said) == 4
    assert _first_tokens_seen() == 3  # the engine's own count of them
    as_json = json.loads(cli("smoke", "recipes/demo-tp4", "--n", "2", "--json").stdout)
    assert [r["ok"] for r in as_json["requests"]] == [True, True]
    assert as_json["summary"]["requests"] == 2 and as_json["summary"]["failed"] == 0


def test_smoke_n_on_a_dead_endpoint_says_each_and_fails(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("smoke", "recipes/demo-tp4", "--n", "2", "--concurrency", "2")
    assert res.returncode == 1
    said = res.stdout.splitlines()
    assert len(said) == 3, said
    for line in said[:2]:
        assert re.fullmatch(r"\[[12]/2\] smoke: cannot reach http://127\.0\.0\.1:30000/v1/chat/completions "
                            r"\(connection refused: is the head running\?\)", line), line
    assert re.fullmatch(r"smoke failed: 2 of 2 requests failed, 0 tokens in [\d.]+ s", said[2]), said
    usage = cli("smoke", "recipes/demo-tp4", "--concurrency", "2")
    assert usage.returncode == 2 and "--concurrency needs --n" in usage.stderr


def test_failed_rank_fails_the_wait(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "demo-fail"
    folder.mkdir()
    text = (ROOT / "recipes" / "demo-tp4" / "recipe.toml").read_text()
    (folder / "recipe.toml").write_text(text.replace('SPARKTUI_DEMO_TICK = "1"',
                                                     'SPARKTUI_DEMO_TICK = "1"\nSPARKTUI_DEMO_FAIL_RANK = "1"'))
    try:
        up = cli("up", str(folder), "--wait")
        assert up.returncode == 1
        assert "first failure: rank 1 (local1)" in up.stderr, up.stderr
        assert "Traceback (most recent call last)" in up.stderr
    finally:
        cli("down", str(folder))


def test_up_refuses_a_port_in_use_and_starts_nothing(cli) -> None:  # type: ignore[no-untyped-def]
    """Something already listens on rank 1's API port (local1: 30000 + its offset of 1): the
    rank would fail at bind after the others had started, so nothing starts, and the sentence
    names the node, the port and the rank. ``--no-port-check`` starts anyway."""
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the last test's probes: TIME_WAIT
        taken.bind(("127.0.0.1", 30001))
        taken.listen()
        up = cli("up", "recipes/demo-tp4", "--wait")
        assert up.returncode == 1
        assert ("local1: port 30001 (rank 1's API port) is already in use; nothing was started"
                in up.stderr), up.stderr
        status = json.loads(cli("status", "recipes/demo-tp4", "--json").stdout)
        assert all(r["container_id"] is None for r in status["ranks"])
        forced = cli("up", "recipes/demo-tp4", "--no-port-check")
        # started anyway: rank 1 then fails at its bind, before up returns (exit 1, its bind
        # error named) or after it (exit 0), as the box's load has it
        assert "nothing was started" not in forced.stderr, forced.stderr
        assert forced.returncode == 0 or "Address already in use" in forced.stderr, forced.stderr
        status = json.loads(cli("status", "recipes/demo-tp4", "--json").stdout)
        assert all(r["container_id"] is not None for r in status["ranks"]), status
