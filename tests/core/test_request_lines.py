"""Each engine's lines about the requests it serves (access log, request log) are told apart from
its own lines: real-format lines of SGLang, vLLM and uvicorn, and near-misses (fatal lines,
lines with the access-log shape that are not access logs). They are kept out of every check."""

from __future__ import annotations

import pytest

from sparktui.core.checks import BootChecks
from sparktui.core.cluster import local_cluster
from sparktui.core.engines import ENGINES, FATAL_LINES, engine, is_probe_line
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import RECIPES

SGLANG = engine("sglang")
VLLM = engine("vllm")

TB = "Traceback (most recent call last):"

# What the engines print, as their sources format it (uvicorn's AccessFormatter; SGLang's
# set_uvicorn_logging_configs and RequestLogger; vLLM's _add_prefix, logger and RequestLogger).
SGLANG_REQUEST_LINES = [
    '[2026-12-01 12:00:00] INFO:     127.0.0.1:53712 - "GET /health HTTP/1.1" 200 OK',
    '[2026-12-01 12:00:00] INFO:     10.0.0.7:40112 - "POST /generate HTTP/1.1" 200 OK',
    '[2026-12-01 12:00:00] INFO:     127.0.0.1:1 - "GET /x?Traceback (most recent call last): HTTP/1.1" '
    '400 Bad Request',
    f'[2026-12-01 12:00:00] INFO:     127.0.0.1:1 - "GET /{TB}" 200 OK HTTP/1.1" 404 Not Found',
    '[2026-12-01 12:00:00] INFO:     127.0.0.1:1 - "get /EngineDeadError HTTP/1.0" 404 Not Found',
    '[2026-12-01 12:00:00] INFO:     [::1]:5 - "GET / HTTP/2" 418 I\'m a Teapot',
    '[2026-12-01 12:00:00] INFO:     ::1:5678 - "GET / HTTP/1.1" 599 ',
    '[2026-12-01 12:00:00] INFO:      - "GET /health HTTP/1.1" 200 OK',  # no peer address
    '[2026-01-01 00:00:00 TP0] INFO:     127.0.0.1:54321 - "GET /health HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5678 - "GET /path HTTP/1.1" 200 OK',  # uvicorn's own format
    '\x1b[32mINFO\x1b[0m:     127.0.0.1:1 - "GET /NCCL error HTTP/1.1" \x1b[31m404 Not Found\x1b[0m',
    # --log-requests: the request object, its text and the reply
    f"[2026-12-01 12:00:00] Receive: obj=GenerateReqInput(rid='a1', text='{TB}', sampling_params={{}})",
    "[2026-12-01 12:00:00] Receive OpenAI: obj={'model': 'm', 'messages': [{'content': 'NCCL error'}]}",
    f"[2026-12-01 12:00:00] Finish: obj=GenerateReqInput(rid='a1'), out={{'text': '{TB}'}}",
    f"[12-01 12:00:00 TP0] Finish: obj=GenerateReqInput(rid='a1'), out={{'text': '{TB}'}}",
    f'{{"timestamp": "2026-12-01T12:00:00.123456", "event": "request.received", "rid": "a1", '
    f'"obj": {{"text": "{TB}"}}}}',
]
VLLM_REQUEST_LINES = [
    '(APIServer pid=123) INFO:     127.0.0.1:5555 - "GET /v1/models HTTP/1.1" 200 OK',
    f'(APIServer pid=123) INFO:     10.1.1.1:5 - "GET /{TB} HTTP/1.1" 404 Not Found',
    'INFO:     127.0.0.1:5555 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    '\x1b[1;36m(APIServer pid=123)\x1b[0;0m INFO:     127.0.0.1:5 - "GET /EngineDeadError HTTP/1.1" 404 Not Found',
    # --enable-log-requests
    f"(APIServer pid=123) INFO 12-01 12:00:00 [logger.py:43] Received request chatcmpl-1: prompt: "
    f"'{TB}', params: SamplingParams(n=1), prompt_token_ids: [1, 2], lora_request: None.",
    '(APIServer pid=123) INFO 12-01 12:00:00 [logger.py:60] Received request chatcmpl-2: '
    '{"messages": [{"content": "EngineDeadError"}]}',
    "(APIServer pid=123) INFO 12-01 12:00:00 [logger.py:62] Received chat request chatcmpl-2: {}",
    f"(APIServer pid=123) DEBUG 12-01 12:00:00 [logger.py:40] Request cmpl-{TB} details: prompt: 'x', "
    "prompt_token_ids: None, prompt_embeds shape: None.",
    f"(APIServer pid=123) INFO 12-01 12:00:00.123 [entrypoints/logger.py:70] Generated response "
    f"chatcmpl-3 (streaming complete): output: '{TB}', output_token_ids: None, finish_reason: stop",
    f"(APIServer pid=123) INFO 12-01 12:00:00 [async_llm.py:300] Added request chatcmpl-{TB}.",
    f"INFO 12-01 12:00:00 [async_llm.py:400] Aborted request chatcmpl-{TB}.",
]

# What an engine prints about itself: never request lines, whatever words they hold.
OWN_LINES = [
    TB,
    f"[2026-12-01 12:00:00 TP0] {TB}",
    f"(Worker_TP0 pid=7) {TB}",
    "[2026-12-01 12:00:00 TP2] RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "(EngineCore_DP0 pid=456) ERROR 12-01 12:00:00 [core.py:700] EngineDeadError",
    "[2026-12-01 12:00:00] The server is fired up and ready to roll!",
    "(APIServer pid=1) INFO:     Application startup complete.",
    "[2026-12-01 12:00:00] INFO:     Started server process [1]",
    "[2026-12-01 12:00:00] WARNING:  Invalid HTTP request received.",
    # the access-log shape, but not an access log
    f'[2026-12-01 12:00:00 TP0] {TB} INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK',
    f'INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK{TB}',  # two lines run together
    f'INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK {TB}',
    f'INFO:     1.2.3.4:5 - "GET / HTTP/1.1" {TB}',
    'INFO:     1.2.3.4:5 - "GET / HTTP/1.1"',
    'ERROR:    1.2.3.4:5 - "GET / HTTP/1.1" 500 Internal Server Error',
    f'{TB} - "GET / HTTP/1.1" 200 OK',
    f'INFO:     1.2.3.4:5 - "{TB}" 200 OK',  # no HTTP version: not a request line
    f"[2026-12-01 12:00:00] Received: obj={TB}",
    f"[2026-12-01 12:00:00 TP0] Scheduler hit an exception: {TB}",
    f"(APIServer pid=123) ERROR 12-01 12:00:00 [serving_chat.py:200] Received request x: {TB}",
    f"(APIServer pid=123) Received request x: {TB}",  # not vLLM's logger format
    f'{{"event": "request.received", "text": "{TB}"}}',
]


@pytest.mark.parametrize("line", SGLANG_REQUEST_LINES)
def test_sglang_request_lines(line: str) -> None:
    assert SGLANG.request_line(line)


@pytest.mark.parametrize("line", VLLM_REQUEST_LINES)
def test_vllm_request_lines(line: str) -> None:
    assert VLLM.request_line(line)


@pytest.mark.parametrize("line", OWN_LINES + list(FATAL_LINES))
@pytest.mark.parametrize("name", sorted(ENGINES))
def test_an_engines_own_lines_are_never_request_lines(name: str, line: str) -> None:
    assert not engine(name).request_line(line)


def test_each_engine_knows_its_own_request_log() -> None:
    assert not SGLANG.request_line(VLLM_REQUEST_LINES[4])  # vLLM's logger format
    assert not VLLM.request_line(SGLANG_REQUEST_LINES[11])  # SGLang's "Receive: obj="


def test_probe_lines_are_probe_requests_of_any_engine() -> None:
    assert is_probe_line(SGLANG_REQUEST_LINES[0]) and is_probe_line(VLLM_REQUEST_LINES[0])
    assert not is_probe_line(SGLANG_REQUEST_LINES[1])  # a request, not a probe
    assert not is_probe_line('[2026-12-01 12:00:00 TP0] echo "GET /health HTTP/1.1" 200 OK')


def demo_checks() -> BootChecks:
    plan = build_plan(load_recipe(RECIPES / "demo-tp4" / "recipe.toml"), local_cluster(4))
    return BootChecks.from_plan(plan.boot, plan.world, engine(plan.engine).request_line)


def test_request_lines_decide_no_check_fatal_or_ready_line() -> None:
    """The demo recipe's checks (must_not_show Traceback, the engine's fatal lines, must_show
    lines and the ready line) over request lines that hold each of their texts: nothing moves;
    the same texts as the engine's own lines decide them."""
    bc = demo_checks()
    texts = [TB, *FATAL_LINES, "The server is fired up and ready to roll!",
             "DEMO rendezvous ok: world=4 rank=0 peers=3", "KV cache ready: #tokens=1",
             "Load weight end. type=Demo"]
    lines = [f'[2026-12-01 12:00:00] INFO:     1.2.3.4:5 - "GET /x?{t} HTTP/1.1" 404 Not Found'
             for t in texts]
    lines += [f"[2026-12-01 12:00:00] Receive: obj=GenerateReqInput(text='{t}')" for t in texts]
    for rank in range(4):
        assert bc.feed(rank, list(enumerate(lines, 1))) == []  # one batch
        for no, line in enumerate(lines, 100):
            assert bc.feed(rank, [(no, line)]) == []  # one by one
    assert bc.fatal(0) is None and not bc.ready_seen(0)
    assert all(bc.overall(c) == "pending" for c in bc.checks)
    updates = bc.feed(0, [(900, f"[2026-12-01 12:00:00 TP0] {TB}")])
    assert [u.state for u in updates] == ["failed"]
    assert bc.fatal(0) is not None and bc.fatal(0).line_no == 900  # type: ignore[union-attr]
    (ready,) = bc.feed(0, [(901, "[2026-12-01 12:00:00 TP0] The server is fired up and ready to roll!")])
    assert ready.check.kind == "ready" and ready.state == "passed"
    assert bc.snapshot().request_line is bc.request_line
