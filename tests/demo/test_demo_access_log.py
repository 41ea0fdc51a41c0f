"""The demo engine's HTTP lines are the real engines' (uvicorn's access line after SGLang's or
vLLM's server prefix), so sparktui's rule for them is tested against the demo's output; a
request it cannot parse is not quoted in a line of its own; a group meeting on the loopback
takes its rendezvous there."""

from __future__ import annotations

from collections.abc import Callable

from sparktui.core.engines import engine, is_probe_line
from tests.demo.test_engine import Rank, free_port, get_json, rank_args, single, spawn, vllm_args
from tests.runner import listening, raw_get

__all__ = ["spawn"]  # the fixture

TB = "Traceback (most recent call last):"


def test_sglang_mode_prints_sglangs_access_lines(spawn: Callable[..., Rank]) -> None:
    rank, port = single(spawn)
    rank.wait_for("The server is fired up")
    assert get_json(port, "/health")[0] == 200
    probe = rank.wait_for('"GET /health HTTP/1.1" 200 OK')
    assert probe.startswith("[") and probe.index("] INFO:     127.0.0.1:") == 20  # [date time], no TP
    assert is_probe_line(probe) and engine("sglang").request_line(probe)

    assert raw_get(port, f"/x?{TB}").startswith(b"HTTP/1.1 400 ")
    line = rank.wait_for(f'"GET /x?{TB} HTTP/1.1" 400 Bad Request')
    assert engine("sglang").request_line(line) and not is_probe_line(line)
    warning = rank.wait_for("Invalid HTTP request received.")
    assert warning.endswith("] WARNING:  Invalid HTTP request received.")
    assert not any("Bad request" in x and "HTTP/1.1" in x and x != line for x in rank.lines)


def test_vllm_mode_prints_the_api_servers_access_lines(spawn: Callable[..., Rank]) -> None:
    port = free_port()
    rank = spawn(*vllm_args(0, 1, free_port(), port, "--demo-boot-seconds", "0"))
    rank.wait_for("Application startup complete.")
    assert get_json(port, "/EngineDeadError")[0] == 404
    line = rank.wait_for('"GET /EngineDeadError HTTP/1.1" 404 Not Found')
    assert line.startswith(f"(APIServer pid={rank.proc.pid}) INFO:     127.0.0.1:")
    assert engine("vllm").request_line(line)


def test_a_group_on_the_loopback_meets_there(spawn: Callable[..., Rank]) -> None:
    dist = free_port()
    head = spawn(*rank_args(0, 2, dist, free_port(), "--demo-boot-seconds", "0"))
    head.wait_for(f"rank 0 listening on port {dist}")
    assert listening().get(dist) == "0100007F"  # 127.0.0.1, not every interface
