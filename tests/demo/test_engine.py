"""The demo engine, run for real: rank processes on 127.0.0.1, real TCP rendezvous, real HTTP."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.demo import config, lines, sglang

ROOT = Path(__file__).resolve().parents[2]
ENGINE_FILE = ROOT / "sparktui" / "demo" / "engine.py"
PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP(\d+)\] ")
# SGLang's uvicorn access log: "[time] " (no TP), as set_uvicorn_logging_configs sets it
ACCESS = re.compile(r'^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO:     127\.0\.0\.1:\d+ - "GET /health HTTP/1\.1" \d{3} ')

# The SGLang flags the seed recipe passes (sparktui appends the rank flags after them).
SEED_ARGS = [
    "--served-model-name", "deepseek-v4.1-flash",
    "--trust-remote-code",
    "--load-format", "safetensors",
    "--ep-size", "1",
    "--attention-backend", "dsv4",
    "--moe-runner-backend", "flashinfer_mxfp4",
    "--fp8-gemm-backend", "flashinfer_cutlass",
    "--mem-fraction-static", "0.80",
    "--chunked-prefill-size", "4096",
    "--context-length", "1048576",
    "--max-total-tokens", "8000000",
    "--max-running-requests", "16",
    "--cuda-graph-max-bs-decode", "16",
    "--min-free-slots-delay", "1",
    "--random-seed", "0",
    "--enable-decoder-swa-bounded-replay",
    "--enable-cache-report",
    "--speculative-algorithm", "DSPARK",
    "--speculative-dspark-block-size", "5",
    "--tool-call-parser", "deepseekv41",
    "--reasoning-parser", "deepseek-v41",
    "--enable-deepseek-v4-fp4-indexer",
    "--watchdog-timeout", "1800",
    "--some-flag=with-a-value",
    "--negative-value", "-1",
]


def lone_package(folder: Path) -> Path:
    """``sparktui/demo`` copied alone under ``folder``, beside an empty ``sparktui/__init__.py``
    (as ``sparktui_testbed/image.py`` writes the image); its ``engine.py``."""
    root = folder / "sparktui"
    shutil.copytree(ROOT / "sparktui" / "demo", root / "demo", ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True)
    (root / "__init__.py").write_text("")
    return root / "demo" / "engine.py"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class Rank:
    """One engine process; its output is collected line by line by a reader thread."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, direct: bool = False,
                 cwd: Path = ROOT) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("SPARKTUI_DEMO_")}
        base.update(env or {})
        # direct: run a copy of the package alone, the way the test image holds it (isolated, no
        # project and no site-packages on the path)
        cmd = ([sys.executable, "-I", "-S", str(lone_package(cwd))] if direct
               else [sys.executable, "-m", "sparktui.demo.engine"])
        self.proc = subprocess.Popen(
            [*cmd, *args], cwd=cwd, env=base, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.lines: list[str] = []
        self.times: list[float] = []
        self._cond = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            now = time.monotonic()
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self.times.append(now)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_for(self, needle: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        with self._cond:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if needle in line:
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    break
                self._cond.wait(left)
        raise AssertionError(f"{needle!r} not seen within {timeout} s; output:\n{self.text()}")

    def wait_exit(self, timeout: float = 10.0) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout} s; output:\n{self.text()}") from None
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        if self.proc.stdout is not None:
            self._reader.join(5)
            self.proc.stdout.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., Rank]]:
    ranks: list[Rank] = []

    def start(*args: str, env: dict[str, str] | None = None, direct: bool = False, cwd: Path = ROOT) -> Rank:
        rank = Rank(list(args), env=env, direct=direct, cwd=cwd)
        ranks.append(rank)
        return rank

    try:
        yield start
    finally:
        for rank in ranks:
            rank.kill()


def rank_args(rank: int, nnodes: int, dist_port: int, http_port: int, *extra: str) -> list[str]:
    return [
        *extra,
        "--model-path", "demo-org/Demo-1B", "--nnodes", str(nnodes), "--node-rank", str(rank),
        "--dist-init-addr", f"127.0.0.1:{dist_port}", "--host", "127.0.0.1", "--port", str(http_port),
    ]


def request(method: str, port: int, path: str, body: Any = None, timeout: float = 10.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {} if data is None else {"Content-Type": "application/json"}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def get_json(port: int, path: str) -> tuple[int, Any]:
    status, raw = request("GET", port, path)
    return status, json.loads(raw)


def single(spawn: Callable[..., Rank], *extra: str, env: dict[str, str] | None = None) -> tuple[Rank, int]:
    port = free_port()
    rank = spawn("--model-path", "demo-org/Demo-1B", "--host", "127.0.0.1", "--port", str(port),
                 "--demo-boot-seconds", "0", *extra, env=env)
    return rank, port


# ---------------------------------------------------------------------------------------------


def test_help_names_the_demo_engine() -> None:
    out = subprocess.run([sys.executable, "-I", str(ENGINE_FILE), "--help"], capture_output=True, text=True,
                         timeout=20, check=True).stdout
    assert "sparktui demo engine" in out
    for switch in ("--demo-boot-seconds", "--demo-fail-rank", "--demo-fail-after", "--demo-stall",
                   "--demo-flood", "--demo-tick", "SPARKTUI_DEMO_BOOT_SECONDS", "SPARKTUI_DEMO_STALL"):
        assert switch in out


def test_two_ranks_rendezvous_and_become_ready(spawn: Callable[..., Rank]) -> None:
    dist, p0, p1 = free_port(""), free_port(), free_port()
    served = ("--served-model-name", "demo-served")
    worker = spawn(*rank_args(1, 2, dist, p1, *served, "--demo-boot-seconds", "0.3"))
    worker.wait_for("rendezvous: rank 1 connecting")
    assert get_json(p1, "/health")[0] == 503  # the worker serves /health while booting
    head = spawn(*rank_args(0, 2, dist, p0, *served, "--demo-boot-seconds", "0.3"))

    head.wait_for(lines.READY_LINE)
    worker.wait_for(lines.WORKER_READY_LINE.format(port=p1))
    for rank, r in ((head, 0), (worker, 1)):
        assert f"DEMO rendezvous ok: world=2 rank={r} peers=0@127.0.0.1,1@127.0.0.1" in rank.text()
        assert "KV cache ready: #tokens=65536" in rank.text()
        assert f"sparktui demo engine (not a real model) rank {r}/2" in rank.text()
        assert "Loading safetensors checkpoint shards:  50% Completed | 2/4" in rank.text()
        own = [line for line in rank.lines if not ACCESS.match(line)]  # the HTTP server's: no TP
        assert [m.group(1) if (m := PREFIX.match(line)) else line for line in own] == [str(r)] * len(own)
    assert sglang.MAX_TOKENS_LINE.format(max_running=config.DEFAULT_MAX_RUNNING) in head.text()
    assert "max_total_num_tokens=" not in worker.text()
    assert lines.READY_LINE not in worker.text()

    assert get_json(p0, "/health") == (200, {"status": "ok"})
    assert get_json(p1, "/health") == (200, {"status": "ok"})
    status, models = get_json(p0, "/v1/models")
    assert status == 200
    assert [(m["id"], m["owned_by"]) for m in models["data"]] == [("demo-served", "sparktui-demo")]
    status, info = get_json(p0, "/get_model_info")
    assert status == 200 and info["model_path"] == "demo-org/Demo-1B"
    assert get_json(p1, "/v1/models")[0] == 404  # the API lives on rank 0 only


def test_streamed_and_plain_chat_completions(spawn: Callable[..., Rank]) -> None:
    rank, port = single(spawn, "--served-model-name", "demo-chat")
    rank.wait_for(lines.READY_LINE)

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = {"model": "demo-chat", "stream": True, "max_tokens": 6,
            "messages": [{"role": "user", "content": "Say hello"}]}
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream"
    events: list[str] = []
    arrived: list[float] = []
    while line := resp.readline():  # read as the server sends, to prove it streams
        if line.strip():
            events.append(line.decode().strip())
            arrived.append(time.monotonic())
    conn.close()
    assert arrived[-1] - arrived[0] > 0.05  # 6 tokens at ~50 tokens/s take >= 0.12 s to arrive
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "demo-chat" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "This is the sparktui demo engine."
    assert len([c for c in chunks if c["choices"][0]["delta"].get("content")]) == 6  # one token per chunk
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 6
    assert chunks[-1]["usage"]["total_tokens"] == chunks[-1]["usage"]["prompt_tokens"] + 6

    status, raw = request("POST", port, "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
    completion = json.loads(raw)
    assert status == 200 and completion["object"] == "chat.completion"
    assert completion["choices"][0]["message"] == {"role": "assistant", "content": "This is the"}
    assert completion["usage"]["completion_tokens"] == 3

    status, raw = request("POST", port, "/v1/chat/completions", {"messages": "not a list"})
    assert status == 400
    rank.wait_for("Prefill batch. #new-seq: 1")
    rank.wait_for('"POST /v1/chat/completions HTTP/1.1" 200 OK')


def test_failing_rank_exits_3_and_the_head_falls_apart(spawn: Callable[..., Rank]) -> None:
    dist, p0, p1 = free_port(""), free_port(), free_port()
    head = spawn(*rank_args(0, 2, dist, p0, "--demo-boot-seconds", "0.3", "--demo-fail-rank", "1"))
    worker = spawn(*rank_args(1, 2, dist, p1, "--demo-boot-seconds", "0.3", "--demo-fail-rank", "1"))
    assert worker.wait_exit() == lines.EXIT_SIMULATED
    out = worker.text()
    assert "Traceback (most recent call last):" in out
    assert "RuntimeError: NCCL error" in out
    assert all(PREFIX.match(line) for line in worker.lines)
    assert head.wait_exit() == lines.EXIT_GROUP_LOST
    assert "Watchdog caught collective operation timeout" in head.text()
    assert lines.READY_LINE not in head.text()


def test_worker_exits_4_when_the_head_dies(spawn: Callable[..., Rank]) -> None:
    dist, p0, p1 = free_port(""), free_port(), free_port()
    head = spawn(*rank_args(0, 2, dist, p0, "--demo-boot-seconds", "0"))
    worker = spawn(*rank_args(1, 2, dist, p1, "--demo-boot-seconds", "0"))
    head.wait_for(lines.READY_LINE)
    worker.wait_for("Worker ready")
    head.proc.kill()
    assert worker.wait_exit() == lines.EXIT_GROUP_LOST
    assert re.search(r"TCPStore .*Failed to recv", worker.text())


def test_stopping_every_rank_at_once_exits_0_everywhere(spawn: Callable[..., Rank]) -> None:
    dist, p0, p1 = free_port(""), free_port(), free_port()
    head = spawn(*rank_args(0, 2, dist, p0, "--demo-boot-seconds", "0"))
    worker = spawn(*rank_args(1, 2, dist, p1, "--demo-boot-seconds", "0"))
    head.wait_for(lines.READY_LINE)
    head.proc.send_signal(signal.SIGTERM)
    worker.proc.send_signal(signal.SIGTERM)
    assert head.wait_exit() == 0
    assert worker.wait_exit() == 0


def test_ticks_are_consecutive(spawn: Callable[..., Rank]) -> None:
    rank, _ = single(spawn, env={"SPARKTUI_DEMO_TICK": "0.05"})  # set through the environment
    rank.wait_for("demo tick 20")
    ticks = [int(m.group(1)) for line in rank.lines if (m := re.search(r"\] demo tick (\d+)$", line))]
    assert ticks == list(range(1, len(ticks) + 1))
    assert len(ticks) >= 20


def test_unknown_sglang_flags_are_ignored(spawn: Callable[..., Rank], tmp_path: Path) -> None:
    port = free_port()
    rank = spawn(*SEED_ARGS, "--model-path", "deepseek-ai/DeepSeek-V4.1-Flash", "--nnodes", "1",
                 "--node-rank", "0", "--dist-init-addr", f"127.0.0.1:{free_port('')}", "--host", "127.0.0.1",
                 "--port", str(port), env={"SPARKTUI_DEMO_BOOT_SECONDS": "0"}, direct=True, cwd=tmp_path)
    rank.wait_for(lines.READY_LINE)
    # less the two it acts on: --max-running-requests, --speculative-algorithm
    assert "DEMO ignoring 23 flag(s)" in rank.text()
    # the whole dump: fields.json travelled with the package
    assert any("server_args=ServerArgs(" in line and len(line) > 10_000 for line in rank.lines)
    status, models = get_json(port, "/v1/models")
    assert status == 200 and models["data"][0]["id"] == "deepseek-v4.1-flash"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_exits_0_promptly(spawn: Callable[..., Rank], sig: signal.Signals) -> None:
    rank, port = single(spawn, "--demo-stall", "--demo-flood", "200")
    rank.wait_for("stalled on purpose by --demo-stall")
    assert get_json(port, "/health")[0] == 503
    started = time.monotonic()
    rank.proc.send_signal(sig)
    assert rank.wait_exit() == 0
    assert time.monotonic() - started < 2.0  # the brief asks for 1 s; leave room for a loaded machine
    assert rank.lines[-1].endswith(f"Received {sig.name.lower()}, shutting down")


def test_sigterm_after_ready_exits_0(spawn: Callable[..., Rank]) -> None:
    rank, _ = single(spawn, "--demo-tick", "0.05")
    rank.wait_for("demo tick 2")
    rank.proc.send_signal(signal.SIGTERM)
    assert rank.wait_exit() == 0
    assert "Received sigterm, shutting down" in rank.text()


def test_flood_prints_many_lines_per_second(spawn: Callable[..., Rank]) -> None:
    rank, _ = single(spawn, "--demo-flood", "2000")
    rank.wait_for(lines.READY_LINE)
    rank.wait_for("Decode batch.")
    time.sleep(0.2)
    start = time.monotonic()
    with rank._cond:
        before = len(rank.lines)
    time.sleep(1.0)
    with rank._cond:
        count = len(rank.lines) - before
    assert count > 500, f"{count} lines in {time.monotonic() - start:.2f} s"
    assert "Decode batch. #running-req: " in rank.text()
    assert all(PREFIX.match(line) for line in rank.lines)


def test_fail_after_ready(spawn: Callable[..., Rank]) -> None:
    rank, _ = single(spawn, env={"SPARKTUI_DEMO_FAIL_AFTER": "0.2"})
    rank.wait_for(lines.READY_LINE)
    assert rank.wait_exit() == lines.EXIT_SIMULATED
    assert "RuntimeError: NCCL error" in rank.text()


def test_worker_gives_up_when_the_head_never_comes(spawn: Callable[..., Rank]) -> None:
    worker = spawn(*rank_args(1, 2, free_port(""), free_port(), "--demo-rendezvous-timeout", "0.5"))
    assert worker.wait_exit() == lines.EXIT_USAGE
    assert "DEMO fatal: rendezvous with rank 0" in worker.text()


def test_http_port_in_use_exits_2(spawn: Callable[..., Rank]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        rank = spawn("--model-path", "m", "--host", "127.0.0.1", "--port", str(busy.getsockname()[1]))
        assert rank.wait_exit() == lines.EXIT_USAGE
    assert "DEMO fatal: cannot serve HTTP" in rank.text()


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--model-path", "m", "--nnodes", "2"], {}),
        (["--model-path", "m", "--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "h:1"], {}),
        (["--model-path", "m"], {"SPARKTUI_DEMO_BOOT_SECONDS": "soon"}),
        (["--model-path", "m"], {"SPARKTUI_DEMO_STALL": "maybe"}),
        (["--port", "1"], {}),  # --model-path is required
    ],
)
def test_bad_arguments_exit_2(args: list[str], env: dict[str, str]) -> None:
    with pytest.raises(SystemExit) as info:
        config.parse_config(args, env=env)
    assert info.value.code == lines.EXIT_USAGE


def test_flags_win_over_environment() -> None:
    env = {"SPARKTUI_DEMO_BOOT_SECONDS": "5", "SPARKTUI_DEMO_TICK": "0.5", "SPARKTUI_DEMO_STALL": "1",
           "SPARKTUI_DEMO_FAIL_AFTER": "3"}
    cfg = config.parse_config(["--model-path", "m", "--demo-boot-seconds", "0", "--unknown", "x"], env=env)
    assert cfg.boot_seconds == 0.0 and cfg.tick == 0.5 and cfg.stall
    assert cfg.fail_after == 3.0 and cfg.fail_rank == 0  # --demo-fail-after alone fails rank 0
    assert cfg.served_model_name == "m"
    assert cfg.ignored == ("--unknown", "x")
    plain = config.parse_config(["--model-path", "m"], env={})
    assert (plain.boot_seconds, plain.fail_rank, plain.stall, plain.flood, plain.tick) == (2.0, None, False, 0, 0)


def test_workers_wait_for_a_restarted_head_before_the_group_forms(spawn: Callable[..., Rank]) -> None:
    dist, p0, p1, p2 = free_port(""), free_port(), free_port(), free_port()
    fast = ("--demo-boot-seconds", "0")
    first_head = spawn(*rank_args(0, 3, dist, p0, *fast))
    worker1 = spawn(*rank_args(1, 3, dist, p1, *fast))
    first_head.wait_for("rank 1 joined")
    first_head.proc.kill()  # before rank 2 arrived: the group never formed
    worker1.wait_for("before the group formed; retrying")
    head = spawn(*rank_args(0, 3, dist, p0, *fast))
    worker2 = spawn(*rank_args(2, 3, dist, p2, *fast))
    head.wait_for(lines.READY_LINE)
    for worker in (worker1, worker2):
        worker.wait_for("Worker ready; serving /health")
        assert worker.proc.poll() is None


# ---------------------------------------------------------------------------------------------
# as vLLM: the flags sparktui appends for a vLLM recipe (rank 0 serves, ranks > 0 --headless)

VLLM_PREFIX = re.compile(r"^\(Worker_TP(\d+) pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[demo\] ")


def vllm_args(rank: int, nnodes: int, master_port: int, http_port: int, *extra: str) -> list[str]:
    args = [*extra, "--model", "demo-org/Demo-1B", "--host", "127.0.0.1", "--port", str(http_port),
            "--nnodes", str(nnodes), "--node-rank", str(rank), "--master-addr", "127.0.0.1",
            "--master-port", str(master_port)]
    return [*args, "--headless"] if rank > 0 else args


def refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_vllm_flags_choose_the_vllm_mode() -> None:
    cfg = config.parse_config(vllm_args(2, 4, 25000, 8002), env={})
    assert (cfg.engine, cfg.headless, cfg.node_rank, cfg.nnodes) == ("vllm", True, 2, 4)
    assert (cfg.dist_host, cfg.dist_port, cfg.model_path) == ("127.0.0.1", 25000, "demo-org/Demo-1B")
    head = config.parse_config(["--model", "m", "--nnodes", "2"], env={})
    assert (head.engine, head.port, head.dist_host, head.dist_port) == ("vllm", 8000, "127.0.0.1", 29501)
    assert config.parse_config(["--model-path", "m"], env={}).engine == "sglang"
    assert config.parse_config(["--model", "m", "--demo-engine", "vllm"],
                             env={"SPARKTUI_DEMO_ENGINE": "sglang"}).engine == "vllm"  # flag wins
    assert config.parse_config(["--model", "m"], env={"SPARKTUI_DEMO_ENGINE": "sglang"}).engine == "sglang"


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--model", "m", "--nnodes", "2", "--node-rank", "1"], {}),  # rank > 0 must be --headless
        (["--model", "m", "--headless"], {}),  # rank 0 serves the API
        (["--model", "m", "--nnodes", "2", "--node-rank", "1", "--headless",
          "--dist-init-addr", "h:1"], {}),  # SGLang's rendezvous flag on a vLLM rank
        (["--model-path", "m", "--master-addr", "h"], {"SPARKTUI_DEMO_ENGINE": "sglang"}),
        (["--model-path", "m", "--demo-engine", "vllm"], {}),  # vLLM needs --model
        (["--model", "m"], {"SPARKTUI_DEMO_ENGINE": "tgi"}),
    ],
)
def test_bad_vllm_arguments_exit_2(args: list[str], env: dict[str, str]) -> None:
    with pytest.raises(SystemExit) as info:
        config.parse_config(args, env=env)
    assert info.value.code == lines.EXIT_USAGE


def test_vllm_head_serves_and_headless_workers_open_no_port(spawn: Callable[..., Rank]) -> None:
    master, p0, p1, p2 = free_port(""), free_port(), free_port(), free_port()
    fast = ("--served-model-name", "demo-vllm", "--demo-boot-seconds", "0.3", "--tensor-parallel-size", "3")
    workers = [spawn(*vllm_args(r, 3, master, port, *fast)) for r, port in ((1, p1), (2, p2))]
    for worker in workers:
        worker.wait_for("rendezvous: rank")
    head = spawn(*vllm_args(0, 3, master, p0, *fast))

    head.wait_for(lines.VLLM_READY_LINE)
    for r, worker in enumerate(workers, 1):
        worker.wait_for(lines.VLLM_WORKER_READY_LINE.format(rank=r, world=3))
        assert f"DEMO rendezvous ok: world=3 rank={r} peers=0@127.0.0.1," in worker.text()
        assert "Launching engine core in headless mode" in worker.text()
        assert [m.group(1) if (m := VLLM_PREFIX.match(line)) else line for line in worker.lines] == \
            [str(r)] * len(worker.lines)
        assert lines.VLLM_READY_LINE not in worker.text()
    assert refused(p1) and refused(p2)  # --headless: no HTTP port at all
    text = head.text()
    assert all(VLLM_PREFIX.match(line) for line in head.lines)
    for line in ("vLLM API server version", "GPU KV cache size: 65,536 tokens", "DEMO all 3 ranks ready",
                 "Starting vLLM API server 0 on http://127.0.0.1:"):
        assert line in text
    # the API server starts only once every worker is ready, and ends the boot log
    assert text.index("DEMO all 3 ranks ready") < text.index(lines.VLLM_READY_LINE)
    assert get_json(p0, "/health") == (200, {"status": "ok"})
    status, models = get_json(p0, "/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == ["demo-vllm"]

    status, raw = request("POST", p0, "/v1/chat/completions",
                          {"model": "demo-vllm", "stream": True, "max_tokens": 4,
                           "messages": [{"role": "user", "content": "hi"}]})
    events = [line for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert status == 200 and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "This is the sparktui"


def test_vllm_head_answers_nothing_before_startup_completes(spawn: Callable[..., Rank]) -> None:
    port = free_port()
    head = spawn("--model", "m", "--host", "127.0.0.1", "--port", str(port), "--demo-boot-seconds", "0",
                 "--demo-stall")
    head.wait_for("stalled on purpose by --demo-stall")
    assert not refused(port)  # bound at once (a port in use fails the rank before it boots)
    with pytest.raises(TimeoutError):  # but like vLLM's API server, it serves only once started
        request("GET", port, "/health", timeout=0.5)
    assert lines.VLLM_READY_LINE not in head.text()


def test_vllm_killed_headless_worker_brings_the_head_down(spawn: Callable[..., Rank]) -> None:
    master, p0, p1 = free_port(""), free_port(), free_port()
    head = spawn(*vllm_args(0, 2, master, p0, "--demo-boot-seconds", "0"))
    worker = spawn(*vllm_args(1, 2, master, p1, "--demo-boot-seconds", "0"))
    head.wait_for(lines.VLLM_READY_LINE)
    worker.wait_for("headless worker ready")
    worker.proc.kill()
    assert head.wait_exit() == lines.EXIT_GROUP_LOST
    assert "Watchdog caught collective operation timeout" in head.text()


def test_vllm_failing_rank_prints_a_vllm_traceback(spawn: Callable[..., Rank]) -> None:
    master, p0, p1 = free_port(""), free_port(), free_port()
    fail = ("--demo-boot-seconds", "0.3", "--demo-fail-rank", "1")
    head = spawn(*vllm_args(0, 2, master, p0, *fail))
    worker = spawn(*vllm_args(1, 2, master, p1, *fail))
    assert worker.wait_exit() == lines.EXIT_SIMULATED
    out = worker.text()
    assert "Traceback (most recent call last):" in out and "RuntimeError: NCCL error" in out
    assert "vllm/v1/worker/gpu_worker.py" in out
    assert head.wait_exit() == lines.EXIT_GROUP_LOST
    assert lines.VLLM_READY_LINE not in head.text()


def test_the_api_key_and_hf_token_are_printed_as_the_engines_print_their_arguments(
        spawn: Callable[..., Rank]) -> None:
    """What a launcher must keep out of its logs: SGLang's ServerArgs and vLLM's non-default
    args hold the key (vLLM's as a list) and the token, as the real engines print them."""
    env = {"HF_TOKEN": "hf_demo_token_1"}
    rank, _ = single(spawn, "--api-key", "sk-demo-key-1", env=env)
    line = rank.wait_for("server_args=ServerArgs(")
    assert "api_key='sk-demo-key-1', hf_token='hf_demo_token_1')" in line
    port = free_port()
    vllm = spawn("--model", "demo-org/Demo-1B", "--port", str(port), "--demo-boot-seconds", "0",
                 "--api-key=sk-demo-key-2", env=env)
    line = vllm.wait_for("non-default args: ")
    assert "'api_key': ['sk-demo-key-2'], 'hf_token': 'hf_demo_token_1'}" in line


def test_a_stopped_worker_hangs_the_heads_completions_while_health_answers(
        spawn: Callable[..., Rank]) -> None:
    """Every completion is a step of the whole group (``step <n>`` / ``done <n>``), as a TP
    forward pass is: SIGSTOP on a worker leaves /health 200 and hangs the head's completions
    (the liveness canary's case); SIGCONT lets them through."""
    dist, p0, p1 = free_port(""), free_port(), free_port()
    fast = ("--demo-boot-seconds", "0")
    worker = spawn(*rank_args(1, 2, dist, p1, *fast))
    head = spawn(*rank_args(0, 2, dist, p0, *fast))
    head.wait_for(lines.READY_LINE)
    generate = {"text": "Say OK.", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    status, raw = request("POST", p0, "/generate", generate)
    assert status == 200 and json.loads(raw)["text"] == "This"
    status, raw = request("POST", p0, "/v1/completions", {"model": "m", "prompt": "Say OK.", "max_tokens": 2})
    assert status == 200 and json.loads(raw)["choices"][0]["text"] == "This is"
    assert worker.proc.poll() is None, worker.text()  # the head's one worker: this one
    os.kill(worker.proc.pid, signal.SIGSTOP)
    try:
        assert get_json(p0, "/health") == (200, {"status": "ok"})
        for path, body in (("/generate", generate),
                           ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                     "max_tokens": 1})):
            try:
                got = request("POST", p0, path, body, timeout=1.0)
            except TimeoutError:
                continue
            # a stopped worker hangs every completion: one answered, say what both ranks said
            raise AssertionError(f"{path} answered {got!r} with the worker stopped\n"
                                 f"head:\n{head.text()[-4000:]}\nworker:\n{worker.text()[-2000:]}")
    finally:
        os.kill(worker.proc.pid, signal.SIGCONT)
    status, raw = request("POST", p0, "/generate", generate, timeout=5.0)
    assert status == 200 and json.loads(raw)["text"] == "This"
    assert head.proc.poll() is None and worker.proc.poll() is None


def test_generate_is_sglangs_only(spawn: Callable[..., Rank]) -> None:
    master, p0 = free_port(""), free_port()
    head = spawn(*vllm_args(0, 1, master, p0, "--demo-boot-seconds", "0"))
    head.wait_for(lines.VLLM_READY_LINE)
    status, _ = request("POST", p0, "/generate", {"text": "hi"})
    assert status == 404
    status, raw = request("POST", p0, "/v1/completions", {"model": "m", "prompt": "hi", "max_tokens": 1})
    assert status == 200 and json.loads(raw)["object"] == "text_completion"
