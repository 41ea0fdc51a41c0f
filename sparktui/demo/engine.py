"""sparktui demo engine: a fake SGLang or vLLM rank (not a real model) for testing a launcher for real.

Run one process (or container) per rank, exactly as a launcher runs ``sglang.launch_server``::

    python3 -m sparktui.demo.engine --model-path M --nnodes N --node-rank R \\
        --dist-init-addr HOST:PORT --host H --port P [any other SGLang flag ...]

or ``vllm serve`` with vLLM's multi-node flags (``--headless`` on every rank but 0)::

    python3 -m sparktui.demo.engine --model M --host H --port P --nnodes N --node-rank R \\
        --master-addr HOST --master-port PORT [--headless] [any other vLLM flag ...]

The flags decide which engine it imitates (a vLLM-only flag: vLLM; else SGLang); ``--demo-engine``
or ``SPARKTUI_DEMO_ENGINE`` forces one.

It needs nothing but CPython 3.10+ and its standard library, as a single file, so it can be copied
into a minimal image (busybox + CPython) and run as ``python3 engine.py ...``.

What it does, like an SGLang rank:

* Every log line goes to stdout, flushed per write, prefixed ``[YYYY-mm-dd HH:MM:SS TP<rank>] ``.
* Rendezvous over real TCP at ``--dist-init-addr``: rank 0 listens on PORT (all interfaces), the
  workers connect (retrying every 0.2 s until the rendezvous timeout) and send their rank; when all
  are in, rank 0 answers "go". The connections stay open: when any rank dies, the others notice
  and exit with code 4, as a TP group falling apart does.
* A boot sequence (banner, server args, torch distributed init, weight shards, KV cache, cuda
  graphs) spread over ``--demo-boot-seconds``, with the lines a recipe's boot checks look for.
* HTTP on ``--host``/``--port``: ``GET /health`` on every rank (503 while booting, 200 when
  ready); on rank 0 also ``GET /v1/models``, ``GET /get_model_info`` and
  ``POST /v1/chat/completions`` (OpenAI format, streaming or not) with canned demo text.

What changes as vLLM:

* Lines are prefixed ``(Worker_TP<rank> pid=<pid>) INFO mm-dd HH:MM:SS [demo] ``; the boot log is
  vLLM's (engine config, world size, weights, KV cache, graph capture); rank 0 waits for every
  worker, then starts its API server and prints ``Application startup complete.``
* Rendezvous at ``--master-addr``/``--master-port`` (defaults 127.0.0.1 and 29501, as vLLM's).
* Rank 0 binds its port at start but serves only from ``Application startup complete.`` on (as
  vLLM's API server does): ``/health``, ``/v1/models``, ``/v1/chat/completions``. ``--headless``
  workers open no port at all, and ranks > 0 must be ``--headless`` (exit 2 otherwise).
* SIGTERM/SIGINT: logs ``Received sigterm, shutting down`` (``sigint``) and exits 0 at once.

Every engine flag it does not know is accepted and ignored (``--flag`` or ``--flag value``);
``--served-model-name`` is honoured (default: the model path).

Demo switches (a flag wins over its environment variable; the variables let a recipe's
``[env]`` table set them):

* ``--demo-boot-seconds S`` / ``SPARKTUI_DEMO_BOOT_SECONDS``: simulated load time (default 2.0, 0 ok).
* ``--demo-fail-rank R`` / ``SPARKTUI_DEMO_FAIL_RANK``: rank R prints an NCCL traceback
  (``RuntimeError: NCCL error ...``) half way through loading weights and exits with code 3.
* ``--demo-fail-after S`` / ``SPARKTUI_DEMO_FAIL_AFTER``: the failing rank crashes S seconds after
  it became ready instead (rank 0 when ``--demo-fail-rank`` is not given).
* ``--demo-stall`` / ``SPARKTUI_DEMO_STALL=1``: never becomes ready; logs a waiting line every 2 s.
* ``--demo-flood LPS`` / ``SPARKTUI_DEMO_FLOOD``: after ready, LPS realistic log lines per second.
* ``--demo-tick S`` / ``SPARKTUI_DEMO_TICK``: after ready, ``demo tick <n>`` every S seconds,
  n = 1, 2, 3, ...
* ``--demo-rendezvous-timeout S`` / ``SPARKTUI_DEMO_RENDEZVOUS_TIMEOUT``: how long rank 0 waits for
  the workers and a worker tries to reach rank 0 (default 120).
* ``--demo-engine sglang|vllm`` / ``SPARKTUI_DEMO_ENGINE``: the engine to imitate (default: from
  the flags).
* ``SPARKTUI_DEMO_CLAMP="field=value[@rank],..."``: the dump of the arguments prints the field with
  that value (on that rank only), as an engine that clamps a flag (``max_running_requests=13@2``);
  ``SPARKTUI_DEMO_DROP="field[@rank],..."`` leaves the field out, as one that never heard of it.

The dump is built from ``fields.json`` next to this file (the shipped SGLang and vLLM flag tables:
every field with its default, the command line's flags applied); without it, a short one.

Exit codes:

* 0: stopped by SIGTERM or SIGINT.
* 1: internal error of the demo engine (a bug; the traceback is logged).
* 2: bad arguments or environment values, a port that cannot be bound, the rendezvous timed out
  or the head refused this rank.
* 3: simulated failure (``--demo-fail-rank`` / ``--demo-fail-after``).
* 4: the TP group fell apart: another rank died or left after the group formed.

Rendezvous protocol (text lines over the TCP connection): worker ``hello <rank> <nnodes>``; head
``go <peers>`` or ``error <reason>``; worker ``ready`` when booted; either side ``bye`` when it
shuts down on a signal (the peer then waits 1 s for its own signal before falling apart, so that
stopping every rank at once exits 0 everywhere).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, BinaryIO, NamedTuple

ENGINE_NAME = "sparktui demo engine"
OWNED_BY = "sparktui-demo"
SERVER_VERSION = "sparktui-demo-engine/0.1"

READY_LINE = "The server is fired up and ready to roll!"
WORKER_READY_LINE = "Worker ready; serving /health on port {port}"
VLLM_READY_LINE = "Application startup complete."
VLLM_WORKER_READY_LINE = "DEMO headless worker ready: rank {rank} of {world} (--headless: no HTTP port)"
VLLM_VERSION = "0.10.1.1+sparktui.demo"
VLLM_KV_CACHE_LINE = "GPU KV cache size: {tokens:,} tokens"
RENDEZVOUS_OK_LINE = "DEMO rendezvous ok: world={world} rank={rank} peers={peers}"
KV_CACHE_LINE = "KV cache ready: #tokens={tokens}, K size: 1.50 GB, V size: 1.50 GB"
MAX_TOKENS_LINE = (
    "max_total_num_tokens=65536, chunked_prefill_size=4096, max_prefill_tokens=16384, "
    "max_running_requests=16, context_len=32768"
)
TICK_LINE = "demo tick {n}"
SHUTDOWN_LINE = "Received {signame}, shutting down"

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_SIMULATED = 3
EXIT_GROUP_LOST = 4

KV_TOKENS = 65536
CONTEXT_LEN = 32768
DEFAULT_MAX_TOKENS = 64
TOKENS_PER_SECOND = 50.0
STALL_PERIOD = 2.0
BYE_GRACE = 1.0
CONNECT_RETRY = 0.2
HELLO_TIMEOUT = 10.0
SHARDS = 4

DEMO_TEXT = (
    "This is the sparktui demo engine. It is not a real model: every reply is the same canned text, "
    "streamed at about fifty tokens per second, so that a launcher, its health checks and its log "
    "views can be tested end to end without a GPU."
)


# ---------------------------------------------------------------------------------------------
# configuration


class Config(NamedTuple):
    model_path: str
    served_model_name: str
    nnodes: int
    node_rank: int
    dist_host: str | None
    dist_port: int | None
    host: str
    port: int
    boot_seconds: float
    fail_rank: int | None
    fail_after: float | None
    stall: bool
    flood: float
    tick: float
    rendezvous_timeout: float
    ignored: tuple[str, ...]
    engine: str = "sglang"  # "sglang" or "vllm": which engine's flags, log and HTTP it imitates
    headless: bool = False  # vLLM --headless: a worker that opens no port
    argv: tuple[str, ...] = ()  # the whole command line, for the dump of the arguments


_ENV = {
    "boot_seconds": "SPARKTUI_DEMO_BOOT_SECONDS",
    "fail_rank": "SPARKTUI_DEMO_FAIL_RANK",
    "fail_after": "SPARKTUI_DEMO_FAIL_AFTER",
    "stall": "SPARKTUI_DEMO_STALL",
    "flood": "SPARKTUI_DEMO_FLOOD",
    "tick": "SPARKTUI_DEMO_TICK",
    "rendezvous_timeout": "SPARKTUI_DEMO_RENDEZVOUS_TIMEOUT",
    "engine": "SPARKTUI_DEMO_ENGINE",
}

ENGINES = ("sglang", "vllm")
VLLM_ONLY = ("--model", "--master-addr", "--master-port", "--headless")
SGLANG_ONLY = ("--model-path", "--dist-init-addr")
DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000}
VLLM_MASTER_PORT = 29501  # vLLM's default --master-port

_HELP_EPILOG = """\
The engine it imitates follows from the flags: SGLang's (--model-path, --dist-init-addr) or
vLLM's (--model, --master-addr, --master-port, --headless); --demo-engine forces one.
Every other --flag [value] (the rest of the engine's flags) is accepted and ignored.

Each demo switch can also come from the environment (a flag wins):
  SPARKTUI_DEMO_BOOT_SECONDS, SPARKTUI_DEMO_FAIL_RANK, SPARKTUI_DEMO_FAIL_AFTER,
  SPARKTUI_DEMO_STALL=1, SPARKTUI_DEMO_FLOOD, SPARKTUI_DEMO_TICK, SPARKTUI_DEMO_RENDEZVOUS_TIMEOUT,
  SPARKTUI_DEMO_ENGINE
The dump of the arguments (SGLang's server_args=ServerArgs(...), vLLM's non-default args) can
show flags that did not take effect: SPARKTUI_DEMO_CLAMP="field=value[@rank],..." prints the
field with that value (on that rank only), SPARKTUI_DEMO_DROP="field[@rank],..." leaves it out.

exit codes: 0 stopped by SIGTERM/SIGINT, 1 internal error, 2 bad arguments / port in use /
rendezvous failed, 3 simulated failure (--demo-fail-rank), 4 the TP group fell apart (a peer died)
"""


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=(
            f"{ENGINE_NAME}: a fake SGLang or vLLM rank (not a real model). It rendezvouses with the other "
            "ranks over TCP, prints a realistic boot log and serves /health and an OpenAI-style API "
            "with canned text, so a launcher can be tested without GPUs."
        ),
        epilog=_HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    sg = parser.add_argument_group("SGLang rank flags")
    sg.add_argument("--model-path", default=None, help="served checkpoint (only named, never read)")
    sg.add_argument("--served-model-name", default=None, help="model id in the API (default: model path)")
    sg.add_argument("--nnodes", type=int, default=1, help="number of ranks (default 1)")
    sg.add_argument("--node-rank", type=int, default=0, help="this rank, 0 is the head (default 0)")
    sg.add_argument("--dist-init-addr", default=None, metavar="HOST:PORT", help="rendezvous address")
    sg.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    sg.add_argument("--port", type=int, default=None, help="HTTP port (default 30000; vLLM 8000)")
    sg.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=None, metavar="N",
                    help="TP size, either engine's spelling (taken; the demo's world is --nnodes)")
    vl = parser.add_argument_group("vLLM rank flags (--nnodes, --node-rank, --host and --port as above)")
    vl.add_argument("--model", default=None, help="served checkpoint, vLLM's spelling (never read)")
    vl.add_argument("--master-addr", default=None, metavar="HOST", help="rendezvous host (vLLM)")
    vl.add_argument("--master-port", type=int, default=None, metavar="PORT",
                    help=f"rendezvous port (vLLM, default {VLLM_MASTER_PORT})")
    vl.add_argument("--headless", action="store_true", default=False,
                    help="a vLLM worker rank: no API server, no port")
    demo = parser.add_argument_group("demo switches")
    demo.add_argument("--demo-engine", choices=ENGINES, default=None,
                      help="imitate this engine (default: follows from the flags)")
    demo.add_argument("--demo-boot-seconds", metavar="S", default=None, help="simulated load time (2.0)")
    demo.add_argument("--demo-fail-rank", metavar="R", default=None, help="rank R crashes mid-boot (exit 3)")
    demo.add_argument("--demo-fail-after", metavar="S", default=None, help="crash S seconds after ready")
    demo.add_argument("--demo-stall", action="store_true", default=None, help="never become ready")
    demo.add_argument("--demo-flood", metavar="LPS", default=None, help="after ready, LPS log lines/s")
    demo.add_argument("--demo-tick", metavar="S", default=None, help="after ready, 'demo tick <n>' every S s")
    demo.add_argument("--demo-rendezvous-timeout", metavar="S", default=None, help="rendezvous budget (120)")
    return parser


def _number(parser: argparse.ArgumentParser, name: str, raw: str, *, integer: bool = False) -> float:
    try:
        value = float(int(raw)) if integer else float(raw)
    except ValueError:
        parser.error(f"{name}={raw!r} is not {'an integer' if integer else 'a number'}")
    if value < 0 or value != value or value == float("inf"):
        parser.error(f"{name}={raw!r} must be a finite number >= 0")
    return value


def parse_config(argv: Sequence[str] | None = None, env: dict[str, str] | None = None) -> Config:
    """Parse SGLang- or vLLM-style rank flags plus the demo switches (flag, else environment, else
    default). The engine imitated is ``--demo-engine``, else vLLM when a vLLM-only rank flag is
    given, else SGLang."""
    environ = dict(os.environ) if env is None else env
    parser = _build_parser()
    ns, extra = parser.parse_known_args(None if argv is None else list(argv))
    values: dict[str, Any] = vars(ns)

    def pick(key: str) -> tuple[str, str] | None:
        flag = values[f"demo_{key}"]
        if flag is not None:
            return "--demo-" + key.replace("_", "-"), str(flag)
        raw = environ.get(_ENV[key], "").strip()
        return (_ENV[key], raw) if raw else None

    def num(key: str, default: float | None, *, integer: bool = False) -> float | None:
        found = pick(key)
        return default if found is None else _number(parser, found[0], found[1], integer=integer)

    stall_flag = values["demo_stall"]
    if stall_flag:
        stall = True
    else:
        raw_stall = environ.get(_ENV["stall"], "").strip().lower()
        if raw_stall in ("", "0", "false", "no", "off"):
            stall = False
        elif raw_stall in ("1", "true", "yes", "on"):
            stall = True
        else:
            parser.error(f"{_ENV['stall']}={raw_stall!r} is not a boolean (use 1 or 0)")

    def given(flag: str) -> bool:
        value = values[flag[2:].replace("-", "_")]
        return value is not None and value is not False

    chosen = pick("engine")
    if chosen is not None and chosen[1] not in ENGINES:
        parser.error(f"{chosen[0]}={chosen[1]!r} is not one of {', '.join(ENGINES)}")
    vllm_flags = [f for f in VLLM_ONLY if given(f) and f != "--model"]  # SGLang also knows --model
    sglang_flags = [f for f in SGLANG_ONLY if given(f)]
    if chosen is not None:
        mode = chosen[1]
    elif vllm_flags or (given("--model") and not sglang_flags):
        mode = "vllm"
    else:
        mode = "sglang"
    others = vllm_flags if mode == "sglang" else sglang_flags
    if others:
        parser.error(f"{' '.join(others)}: rank flag(s) of the other engine; this rank imitates {mode} "
                     "(its flags, or --demo-engine, decide)")
    model = (values["model_path"] or values["model"]) if mode == "sglang" else values["model"]
    if not model:
        parser.error("the following arguments are required: "
                     + ("--model-path" if mode == "sglang" else "--model"))

    nnodes: int = values["nnodes"]
    rank: int = values["node_rank"]
    if nnodes < 1:
        parser.error("--nnodes must be at least 1")
    if not 0 <= rank < nnodes:
        parser.error(f"--node-rank {rank} is out of range for --nnodes {nnodes}")
    port: int = DEFAULT_PORTS[mode] if values["port"] is None else values["port"]
    if not 0 <= port <= 65535:
        parser.error(f"--port {port} is not a TCP port")
    headless: bool = values["headless"]
    if headless and rank == 0:
        parser.error("--headless on rank 0: the head serves the API (vLLM workers on ranks > 0 run headless)")
    if mode == "vllm" and rank > 0 and not headless:
        parser.error(f"--node-rank {rank} without --headless: with vLLM's multi-node flags only rank 0 "
                     "serves the API; every other rank runs --headless")
    dist_host: str | None = None
    dist_port: int | None = None
    addr: str | None = values["dist_init_addr"]
    if mode == "vllm":
        if nnodes > 1 or values["master_addr"] or values["master_port"] is not None:
            dist_host = values["master_addr"] or "127.0.0.1"
            dist_port = VLLM_MASTER_PORT if values["master_port"] is None else values["master_port"]
            if not 0 < dist_port < 65536:
                parser.error(f"--master-port {dist_port} is not a TCP port")
    elif addr:
        host_part, sep, port_part = addr.rpartition(":")
        if not sep or not host_part or not port_part.isdigit() or not 0 < int(port_part) < 65536:
            parser.error(f"--dist-init-addr {addr!r} is not HOST:PORT")
        dist_host, dist_port = host_part.strip("[]"), int(port_part)
    elif nnodes > 1:
        parser.error("--dist-init-addr HOST:PORT is required when --nnodes > 1")

    fail_rank = num("fail_rank", None, integer=True)
    fail_after = num("fail_after", None)
    if fail_after is not None and fail_rank is None:
        fail_rank = 0
    model_path: str = model
    return Config(
        model_path=model_path,
        served_model_name=values["served_model_name"] or model_path,
        nnodes=nnodes,
        node_rank=rank,
        dist_host=dist_host,
        dist_port=dist_port,
        host=values["host"],
        port=port,
        boot_seconds=num("boot_seconds", 2.0) or 0.0,
        fail_rank=None if fail_rank is None else int(fail_rank),
        fail_after=fail_after,
        stall=stall,
        flood=num("flood", 0.0) or 0.0,
        tick=num("tick", 0.0) or 0.0,
        rendezvous_timeout=num("rendezvous_timeout", 120.0) or 0.0,
        ignored=tuple(extra),
        engine=mode,
        headless=headless,
        argv=tuple(sys.argv[1:] if argv is None else argv),
    )


FIELDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fields.json")


def _flag_value(kind: str, nullable: bool, text: str) -> Any:
    """The value the engine's parser makes of a flag's text (the text when it would refuse it)."""
    if nullable and text == "None":
        return None
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "json":
            return json.loads(text)
    except ValueError:
        pass
    return text


def _is_flag_token(token: str) -> bool:
    if not token.startswith("-"):
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def engine_table(engine: str) -> dict[str, Any] | None:
    """The engine's table of ``fields.json`` (its version and flags); None without it."""
    try:
        with open(FIELDS_FILE, encoding="utf-8") as f:
            table: dict[str, Any] = json.load(f)[engine]
    except (OSError, ValueError, KeyError):
        return None
    return table


def engine_fields(engine: str, argv: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """``(table version, {field: value})``: every field of the engine's table at its default,
    with the flags of ``argv`` applied as its parser would; None without ``fields.json``."""
    table = engine_table(engine)
    if table is None:
        return None
    return table["version"], table_fields(table, argv)


def table_fields(table: dict[str, Any], argv: Sequence[str]) -> dict[str, Any]:
    """``engine_fields`` of a table already read (vLLM's dump wants it twice: the defaults too)."""
    values: dict[str, Any] = {}
    options: dict[str, list[Any]] = {}
    for flag in table["flags"]:
        opts, dest, _kind, _nargs, _neg, _null, default = flag
        values.setdefault(dest, default)
        for o in opts:
            options[o] = flag
    i = 0
    while i < len(argv):
        name, eq, inline = argv[i].partition("=")
        flag = options.get(name)
        i += 1
        if flag is None:
            continue
        _opts, dest, kind, nargs, negatable, nullable, _default = flag
        if nargs == 0:
            values[dest] = not (negatable and name.startswith("--no-") and not dest.startswith("no_"))
            continue
        texts = [inline] if eq else []
        while not eq and i < len(argv) and not _is_flag_token(argv[i]):
            texts.append(argv[i])
            i += 1
            if nargs not in ("+", "*"):
                break
        items = [_flag_value(kind, nullable, t) for t in texts]
        values[dest] = items if nargs in ("+", "*") else (items[0] if items else None)
    return values


def dump_changes(rank: int, env: dict[str, str] | None = None) -> tuple[dict[str, Any], set[str]]:
    """``SPARKTUI_DEMO_CLAMP`` and ``SPARKTUI_DEMO_DROP`` for this rank: fields to print with
    another value, fields to leave out."""
    environ = os.environ if env is None else env
    clamp: dict[str, Any] = {}
    drop: set[str] = set()
    for key, into in (("SPARKTUI_DEMO_CLAMP", clamp), ("SPARKTUI_DEMO_DROP", drop)):
        for item in environ.get(key, "").split(","):
            item, _at, where = item.strip().partition("@")
            if not item or (where and where.strip() != str(rank)):
                continue
            if isinstance(into, dict):
                field, _eq, text = item.partition("=")
                into[field.strip()] = _flag_value("json", True, text.strip())
            else:
                into.add(item)
    return clamp, drop


def _py(value: Any) -> str:
    """A field as Python's repr prints it; a default the table keeps as ``{"repr": ...}``
    (an enum, a path) as it was printed."""
    if isinstance(value, dict) and set(value) == {"repr"}:
        return str(value["repr"])
    return repr(value)


def _demo_switches(cfg: Config) -> dict[str, Any]:
    return {"demo_boot_seconds": cfg.boot_seconds, "demo_fail_rank": cfg.fail_rank,
            "demo_fail_after": cfg.fail_after, "demo_stall": cfg.stall, "demo_flood": cfg.flood,
            "demo_tick": cfg.tick}


def sglang_dump(cfg: Config, env: dict[str, str] | None = None) -> str | None:
    """``server_args=ServerArgs(...)``: every field of SGLang's table, as SGLang logs it."""
    found = engine_fields("sglang", cfg.argv)
    if found is None:
        return None
    _version, values = found
    # ServerArgs.__post_init__ fills these from the model path
    for dest in ("tokenizer_path", "served_model_name"):
        if values.get(dest) is None:
            values[dest] = cfg.model_path
    values.update(_demo_switches(cfg))
    creds = _credentials(cfg)
    for k in creds:
        values.pop(k, None)
    clamp, drop = dump_changes(cfg.node_rank, env)
    values.update(clamp)
    body = ", ".join(f"{k}={_py(v)}" for k, v in values.items() if k not in drop)
    body += "".join(f", {k}={v!r}" for k, v in creds.items())
    return f"server_args=ServerArgs({body})"


def vllm_dump(cfg: Config, env: dict[str, str] | None = None) -> str | None:
    """``non-default args: {...}``: the fields of vLLM's table whose value is not the default
    (``get_non_default_args``), as vLLM logs them."""
    table = engine_table("vllm")
    if table is None:
        return None
    defaults = table_fields(table, ())
    out = {k: v for k, v in table_fields(table, cfg.argv).items() if v != defaults.get(k)}
    out.update({k: v for k, v in _demo_switches(cfg).items() if v not in (None, False, 0.0)})
    creds = _credentials(cfg)
    for k in creds:
        out.pop(k, None)
    clamp, drop = dump_changes(cfg.node_rank, env)
    out.update(clamp)
    out = {k: v for k, v in out.items() if k not in drop}
    out.update({k: ([v] if k == "api_key" else v) for k, v in creds.items()})
    return f"non-default args: {out!r}"


def _credentials(cfg: Config) -> dict[str, str]:
    """The API key and HF token this rank was given (``--api-key``, ``--hf-token`` or
    ``HF_TOKEN``), which the real engines print among their arguments at boot: a launcher must
    keep them out of its logs."""
    found: dict[str, str] = {}
    for i, arg in enumerate(cfg.ignored):
        flag, eq, value = arg.partition("=")
        if flag in ("--api-key", "--hf-token"):
            value = value if eq else (cfg.ignored[i + 1] if i + 1 < len(cfg.ignored) else "")
            found[flag[2:].replace("-", "_")] = value
    if "hf_token" not in found and os.environ.get("HF_TOKEN"):
        found["hf_token"] = os.environ["HF_TOKEN"]
    return found


# ---------------------------------------------------------------------------------------------
# log output


class Log:
    """Writes ``[time TP<rank>] line`` (SGLang's prefix) or ``(Worker_TP<rank> pid=<pid>) INFO
    mm-dd time [demo] line`` (vLLM's) to stdout, one locked write and flush per batch. The HTTP
    server's lines (``server``) carry what the engine's uvicorn loggers print before theirs:
    ``[time] `` (SGLang) or ``(APIServer pid=<pid>) `` (vLLM)."""

    def __init__(self, rank: int, out: BinaryIO | None = None, style: str = "sglang") -> None:
        if style == "vllm":
            self._lead = f"(Worker_TP{rank} pid={os.getpid()}) INFO "
            self._time, self._tail = "%m-%d %H:%M:%S", " [demo] "
            self._server = (f"(APIServer pid={os.getpid()}) ", "", "")
        else:
            self._lead, self._time, self._tail = "[", "%Y-%m-%d %H:%M:%S", f" TP{rank}] "
            self._server = ("[", self._time, "] ")
        self._out: BinaryIO | None = out if out is not None else getattr(sys.stdout, "buffer", None)
        self._lock = threading.Lock()
        self._closed = False

    def __call__(self, text: str) -> None:
        self.lines(text.split("\n"))

    def lines(self, lines: Sequence[str]) -> None:
        """Write a batch of lines (none may contain a newline) with one write and one flush."""
        self._write(self._lead + time.strftime(self._time) + self._tail, lines)

    def server(self, line: str) -> None:
        """A line of the HTTP server's loggers (uvicorn's in SGLang and vLLM)."""
        lead, stamp, tail = self._server
        self._write(lead + (time.strftime(stamp) if stamp else "") + tail, [line])

    def _write(self, head: str, lines: Sequence[str]) -> None:
        if not lines:
            return
        data = "".join([head + line + "\n" for line in lines]).encode("utf-8", "replace")
        with self._lock:
            if self._closed or self._out is None:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError):
                self._closed = True

    def close(self) -> None:
        """Drop every later line. Lock-free: a writer stuck on a full pipe must not block the exit."""
        self._closed = True


def nccl_traceback(rank: int, after_ready: bool, why: str) -> list[str]:
    """A realistic SGLang scheduler crash: Python traceback ending in an NCCL RuntimeError."""
    sgl = "/sgl-workspace/sglang/python/sglang/srt"
    torch = "/usr/local/lib/python3.12/dist-packages/torch/distributed"
    if after_ready:
        frames = [
            (f"{sgl}/managers/scheduler.py", 2802, "run_scheduler_process",
             "scheduler.event_loop_overlap()"),
            (f"{sgl}/managers/scheduler.py", 1035, "event_loop_overlap",
             "batch_result = self.run_batch(batch)"),
            (f"{sgl}/managers/scheduler.py", 1911, "run_batch",
             "batch_result = self.model_worker.forward_batch_generation("),
            (f"{sgl}/model_executor/model_runner.py", 2041, "forward",
             "output = self._forward_raw("),
            (f"{sgl}/distributed/communication_op.py", 14, "tensor_model_parallel_all_reduce",
             "return get_tp_group().all_reduce(input_)"),
            (f"{torch}/distributed_c10d.py", 2808, "all_reduce",
             "work = group.allreduce([tensor], opts)"),
        ]
    else:
        frames = [
            (f"{sgl}/managers/scheduler.py", 2791, "run_scheduler_process",
             "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
            (f"{sgl}/managers/scheduler.py", 318, "__init__",
             "self.tp_worker = TpModelWorker("),
            (f"{sgl}/managers/tp_worker.py", 84, "__init__",
             "self.model_runner = ModelRunner("),
            (f"{sgl}/model_executor/model_runner.py", 301, "initialize",
             "self.load_model()"),
            (f"{sgl}/model_executor/model_runner.py", 741, "load_model",
             "torch.distributed.barrier(group=get_tp_group().cpu_group)"),
            (f"{torch}/c10d_logger.py", 81, "wrapper",
             "return func(*args, **kwargs)"),
            (f"{torch}/distributed_c10d.py", 4635, "barrier",
             "work = group.barrier(opts=opts)"),
        ]
    return [
        "Scheduler hit an exception: Traceback (most recent call last):",
        *_frames(frames),
        NCCL_ERROR,
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
        f"Last error: ({ENGINE_NAME}: {why})",
        "Received sigquit from a child process. It usually means the child failed.",
        f"DEMO fatal: simulated failure of rank {rank}; exiting with code {EXIT_SIMULATED}",
    ]


NCCL_ERROR = ("RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
              "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3")


def _frames(frames: list[tuple[str, int, str, str]]) -> list[str]:
    """A traceback's frames as Python prints them."""
    out: list[str] = []
    for path, lineno, func, code in frames:
        out += [f'  File "{path}", line {lineno}, in {func}', f"    {code}"]
    return out


def vllm_nccl_traceback(rank: int, after_ready: bool, why: str) -> list[str]:
    """A realistic vLLM worker crash: the worker process's traceback ending in an NCCL error."""
    vllm = "/usr/local/lib/python3.12/dist-packages/vllm"
    torch = "/usr/local/lib/python3.12/dist-packages/torch/distributed"
    if after_ready:
        frames = [
            (f"{vllm}/v1/executor/multiproc_executor.py", 591, "worker_busy_loop",
             "output = func(*args, **kwargs)"),
            (f"{vllm}/v1/worker/gpu_worker.py", 362, "execute_model",
             "output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)"),
            (f"{vllm}/distributed/communication_op.py", 14, "tensor_model_parallel_all_reduce",
             "return get_tp_group().all_reduce(input_)"),
            (f"{torch}/distributed_c10d.py", 2808, "all_reduce",
             "work = group.allreduce([tensor], opts)"),
        ]
    else:
        frames = [
            (f"{vllm}/v1/executor/multiproc_executor.py", 559, "worker_main",
             "worker = WorkerProc(*args, **kwargs)"),
            (f"{vllm}/v1/worker/gpu_worker.py", 214, "load_model",
             "self.model_runner.load_model(eep_scale_up=eep_scale_up)"),
            (f"{vllm}/distributed/parallel_state.py", 1043, "barrier",
             "torch.distributed.barrier(group=self.cpu_group)"),
            (f"{torch}/distributed_c10d.py", 4635, "barrier",
             "work = group.barrier(opts=opts)"),
        ]
    return [
        f"WorkerProc hit an exception (rank {rank}).",
        "Traceback (most recent call last):",
        *_frames(frames),
        NCCL_ERROR,
        f"Last error: ({ENGINE_NAME}: {why})",
        f"DEMO fatal: simulated failure of rank {rank}; exiting with code {EXIT_SIMULATED}",
    ]


def flood_lines(start: int, count: int) -> list[str]:
    """``count`` realistic decode-loop lines, numbered from ``start`` (deterministic, cheap)."""
    out: list[str] = []
    for i in range(start, start + count):
        running = 1 + (i // 7) % 16
        tokens = 1000 + (i * 37) % 60000
        if i % 97 == 96:
            out.append(
                f"Prefill batch. #new-seq: 1, #new-token: {64 + i % 900}, #cached-token: {i % 512}, "
                f"token usage: {tokens / KV_TOKENS:.2f}, #running-req: {running}, #queue-req: 0"
            )
        elif i % 251 == 250:
            client = f"10.0.0.{1 + i % 250}:{40000 + i % 20000}"
            out.append(f'INFO:     {client} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        elif i % 1009 == 1008:
            out.append(f"Cache hit rate: {0.5 + (i % 40) / 100:.2f}, #evicted-token: {i % 4096}")
        else:
            out.append(
                f"Decode batch. #running-req: {running}, #token: {tokens}, "
                f"token usage: {tokens / KV_TOKENS:.2f}, "
                f"gen throughput (token/s): {60 + (i * 13) % 4000 / 100:.2f}, #queue-req: 0"
            )
    return out


def demo_tokens() -> list[str]:
    words = DEMO_TEXT.split(" ")
    return [words[0]] + [" " + word for word in words[1:]]


# ---------------------------------------------------------------------------------------------
# rendezvous connections


class _Conn:
    """One rendezvous TCP connection speaking newline-terminated text."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = b""
        self._send_lock = threading.Lock()
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def send_line(self, text: str, *, nowait: bool = False) -> None:
        data = (text + "\n").encode()
        with self._send_lock:
            if nowait:
                self.sock.send(data, getattr(socket, "MSG_DONTWAIT", 0))
            else:
                self.sock.sendall(data)

    def read_line(self) -> str | None:
        """The next line, or None at end of stream. Socket errors and timeouts raise OSError."""
        while b"\n" not in self._buf:
            data = self.sock.recv(4096)
            if not data:
                return None
            self._buf += data
            if len(self._buf) > 65536:
                raise OSError("rendezvous line too long")
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("utf-8", "replace").strip()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _Peer:
    def __init__(self, rank: int, conn: _Conn, addr: str) -> None:
        self.rank = rank
        self.conn = conn
        self.addr = addr
        self.ready = False
        self.bye = False


def _listen_address(dist_host: str, family: int) -> str:
    """Where rank 0 listens for the rendezvous: on the loopback when the group meets there (the
    local cluster: nothing else on the network should reach it), else on every interface."""
    if dist_host in ("127.0.0.1", "localhost", "::1"):
        return "::1" if family == socket.AF_INET6 else "127.0.0.1"
    return "::" if family == socket.AF_INET6 else "0.0.0.0"


# ---------------------------------------------------------------------------------------------
# HTTP


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        if ":" in engine.cfg.host:
            self.address_family = socket.AF_INET6
        super().__init__((engine.cfg.host, engine.cfg.port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn, a DNS lookup that can hang in a container.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        kind, value = sys.exc_info()[:2]
        name = kind.__name__ if kind else "?"
        self.engine.log(f"DEMO http: error while serving {client_address}: {name}: {value}")


class _BadRequest(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = SERVER_VERSION
    sys_version = ""
    timeout = 120

    @property
    def engine(self) -> Engine:
        server = self.server
        assert isinstance(server, _HTTPServer)
        return server.engine

    # -- logging like uvicorn's access log ------------------------------------------------------
    # The request line is logged as it came, as a lenient server would (uvicorn refuses a target
    # with spaces): any text a client sends can reach an access line, which is what sparktui's
    # rule for them (core/engines/requestlog) is tested against.
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        try:
            status = int(code)
            phrase = self.responses.get(status, ("",))[0]
        except (TypeError, ValueError):
            status, phrase = 0, str(code)
        host, port = self.client_address[:2]
        self.engine.log.server(f'INFO:     {host}:{port} - "{self.requestline}" {status} {phrase}')

    def log_error(self, format: str, *args: Any) -> None:
        if format.startswith("code "):  # send_error: the request could not be parsed
            # uvicorn's sentence, which names no part of the request (the stdlib's quotes it).
            self.engine.log.server("WARNING:  Invalid HTTP request received.")
        else:
            self.log_message(format, *args)

    def log_message(self, format: str, *args: Any) -> None:
        self.engine.log("DEMO http: " + (format % args))

    # -- helpers --------------------------------------------------------------------------------
    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str) -> None:
        body = {"object": "error", "message": message, "type": kind, "param": None, "code": status}
        self._send_json(status, body)

    def _api_available(self) -> bool:
        eng = self.engine
        if eng.cfg.node_rank != 0:
            message = f"{ENGINE_NAME} rank {eng.cfg.node_rank} is a worker: send API requests to rank 0"
            self._error(404, message, "NotFoundError")
            return False
        if not eng.ready.is_set():
            self._error(503, f"{ENGINE_NAME} is still booting", "ServiceUnavailableError")
            return False
        return True

    # -- routes ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        eng = self.engine
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/health_generate"):
            if eng.ready.is_set():
                self._send_json(200, {"status": "ok"})
            else:
                self._send_json(503, {"status": "starting",
                                      "detail": f"{ENGINE_NAME} rank {eng.cfg.node_rank} is not ready"})
        elif path == "/v1/models":
            if self._api_available():
                self._send_json(200, {"object": "list", "data": [eng.model_card()]})
        elif path == "/get_model_info":
            if self._api_available():
                self._send_json(200, eng.model_info())
        else:
            self._error(404, f"{ENGINE_NAME}: no route for GET {path}", "NotFoundError")

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length_text = self.headers.get("Content-Length")
        try:
            length = int(length_text) if length_text is not None else 0
            if length < 0:
                raise ValueError(length_text)
        except ValueError:
            self.close_connection = True
            self._error(400, "bad Content-Length", "BadRequestError")
            return
        raw = self.rfile.read(length) if length else b""
        if path != "/v1/chat/completions":
            self._error(404, f"{ENGINE_NAME}: no route for POST {path}", "NotFoundError")
            return
        if not self._api_available():
            return
        try:
            request = self.engine.parse_chat_request(raw)
        except _BadRequest as exc:
            self._error(400, str(exc), "BadRequestError")
            return
        self.engine.serve_chat(self, request)


class _ChatRequest(NamedTuple):
    stream: bool
    max_tokens: int
    prompt_tokens: int


# ---------------------------------------------------------------------------------------------
# the engine


class Engine:
    """One demo rank: boot thread, rendezvous threads, HTTP server; the main thread waits to exit."""

    def __init__(self, cfg: Config, log: Log | None = None) -> None:
        self.cfg = cfg
        self.rank = cfg.node_rank
        self.log = log if log is not None else Log(cfg.node_rank, style=cfg.engine)
        self.ready = threading.Event()
        self.created = int(time.time())
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._exit_lock = threading.Lock()
        self._exit_claimed = False
        self._exit_code: int | None = None
        self._claimed_code = EXIT_OK
        self._signal: int | None = None
        self._cond = threading.Condition()
        self._workers: dict[int, _Peer] = {}  # head: rank -> peer
        self._formed = False
        self._head: _Peer | None = None  # worker: the connection to rank 0
        self._req_lock = threading.Lock()
        self._req_count = 0
        self._running = 0
        self._http: _HTTPServer | None = None

    # -- exit handling --------------------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def fatal(self, lines: Sequence[str], code: int) -> None:
        """Log the fatal lines and make the process exit with ``code`` (first caller wins)."""
        with self._exit_lock:
            if self._exit_claimed:
                return
            self._exit_claimed = True
            self._claimed_code = code
        self.log.lines([part for line in lines for part in line.split("\n")])
        self._exit_code = code
        self._wake()

    @property
    def exiting(self) -> bool:
        return self._exit_claimed

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signal = signum
        self._wake()

    def _finish(self, code: int) -> None:
        self.log.close()
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stdout.flush()
        os._exit(code)

    def _say_bye(self) -> None:
        peers = list(self._workers.values()) if self.rank == 0 else [self._head] if self._head else []
        for peer in peers:
            with contextlib.suppress(OSError):
                peer.conn.send_line("bye", nowait=True)

    def run(self) -> int:
        """Boot in the background and wait (in the main thread) for a signal or a fatal error."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        threading.excepthook = self._thread_crashed
        self._log_banner()
        if self.cfg.headless or self._open_http():  # a headless vLLM worker opens no port
            self._thread(self._boot_vllm if self.cfg.engine == "vllm" else self._boot, "boot")
        while True:
            try:
                select.select([self._wake_r], [], [])
                os.read(self._wake_r, 512)
            except InterruptedError:  # pragma: no cover - PEP 475 retries select itself
                pass
            if self._exit_code is not None:
                self._finish(self._exit_code)
            if self._signal is not None:
                with self._exit_lock:
                    if self._exit_claimed:
                        # A fatal error is being logged and wakes us when done; should its write
                        # block on a full pipe, still exit (with its code) soon.
                        self._thread(_exit_soon, "exit", self._claimed_code, 0.8)
                        self._signal = None
                        continue
                    self._exit_claimed = True
                # If stdout is a pipe nobody drains, logging would block: exit 0 regardless, soon.
                self._thread(_exit_soon, "exit", EXIT_OK, 0.8)
                name = signal.Signals(self._signal).name.lower()
                self.log(SHUTDOWN_LINE.format(signame=name))
                self._say_bye()
                self._finish(EXIT_OK)

    def _open_http(self) -> bool:
        """Bind the API port before booting, so a port in use fails at once. SGLang serves
        ``/health`` (503) while booting; vLLM's API server holds its bound socket and serves only
        from "Application startup complete." on (a request before that waits)."""
        try:
            self._http = _HTTPServer(self)
        except OSError as exc:
            self.fatal([f"ERROR: [Errno {exc.errno}] error while attempting to bind on address "
                        f"({self.cfg.host!r}, {self.cfg.port}): {exc.strerror}",
                        f"DEMO fatal: cannot serve HTTP on {self.cfg.host}:{self.cfg.port}; "
                        f"exiting with code {EXIT_USAGE}"], EXIT_USAGE)
            return False
        if self.cfg.engine == "sglang":
            self._thread(self._http.serve_forever, "http", 1.0)
        return True

    def _thread(self, target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=f"demo-{name}", daemon=True)
        thread.start()
        return thread

    def _thread_crashed(self, args: threading.ExceptHookArgs) -> None:
        import traceback

        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        name = args.thread.name if args.thread else "?"
        self.fatal([f"DEMO internal error in thread {name}:", *text.rstrip().split("\n"),
                    f"DEMO fatal: internal error; exiting with code {EXIT_INTERNAL}"], EXIT_INTERNAL)

    # -- boot -----------------------------------------------------------------------------------
    def _log_banner(self) -> None:
        cfg = self.cfg
        dist = f"{cfg.dist_host}:{cfg.dist_port}" if cfg.dist_host else None
        lines = [f"{ENGINE_NAME} (not a real model) rank {cfg.node_rank}/{cfg.nnodes}"]
        if cfg.engine == "vllm":
            args: dict[str, Any] = {
                "model": cfg.model_path, "served_model_name": [cfg.served_model_name], "host": cfg.host,
                "port": cfg.port, "tensor_parallel_size": cfg.nnodes, "nnodes": cfg.nnodes,
                "node_rank": cfg.node_rank, "master_addr": cfg.dist_host, "master_port": cfg.dist_port,
                "headless": cfg.headless, **_demo_switches(cfg),
                **{k: ([v] if k == "api_key" else v) for k, v in _credentials(cfg).items()},
            }
            lines.append(f"vLLM {'API server ' if not cfg.headless else ''}version {VLLM_VERSION}")
            if not cfg.headless:  # vLLM's API server setup logs them; a headless worker does not
                lines.append(vllm_dump(cfg) or f"non-default args: {args!r}")
        else:
            lines.append(sglang_dump(cfg) or
                f"server_args=ServerArgs(model_path={cfg.model_path!r}, tokenizer_path={cfg.model_path!r}, "
                f"served_model_name={cfg.served_model_name!r}, dtype='bfloat16', tp_size={cfg.nnodes}, "
                f"nnodes={cfg.nnodes}, node_rank={cfg.node_rank}, dist_init_addr={dist!r}, "
                f"host={cfg.host!r}, port={cfg.port}, context_length={CONTEXT_LEN}, "
                f"chunked_prefill_size=4096, max_running_requests=16, "
                f"demo_boot_seconds={cfg.boot_seconds}, demo_fail_rank={cfg.fail_rank}, "
                f"demo_fail_after={cfg.fail_after}, demo_stall={cfg.stall}, demo_flood={cfg.flood}, "
                f"demo_tick={cfg.tick}"
                + "".join(f", {k}={v!r}" for k, v in _credentials(cfg).items()) + ")")
        flags = [arg.split("=", 1)[0] for arg in cfg.ignored if arg.startswith("-")]
        if cfg.ignored:
            lines.append(f"DEMO ignoring {len(flags)} flag(s) the demo engine does not implement: "
                         + (" ".join(flags) or " ".join(cfg.ignored)))
        if cfg.fail_rank is not None and not 0 <= cfg.fail_rank < cfg.nnodes:
            lines.append(f"DEMO warning: --demo-fail-rank {cfg.fail_rank} is not a rank of this "
                         f"{cfg.nnodes}-rank group; nothing will fail")
        self.log.lines(lines)

    def _fails_here(self) -> bool:
        return self.cfg.fail_rank == self.rank

    def _boot(self) -> None:
        cfg, log = self.cfg, self.log
        started = time.monotonic()
        log(f"DEMO health server listening on http://{cfg.host}:{cfg.port} (503 until ready)")
        log("Init torch distributed begin.")
        peers = self._rendezvous()
        if peers is None:
            return
        log.lines([
            RENDEZVOUS_OK_LINE.format(world=cfg.nnodes, rank=self.rank, peers=peers),
            f"Init torch distributed ends. mem usage={0.03 * cfg.nnodes:.2f} GB",
        ])
        avail = 119.53 - 0.07 * self.rank
        log(f"Load weight begin. avail mem={avail:.2f} GB")
        if not self._load_shards():
            return
        weights = 42.17
        left = avail - weights - 3.0
        log.lines([
            f"Load weight end. type=DemoForCausalLM, dtype=torch.bfloat16, "
            f"avail mem={avail - weights:.2f} GB, mem usage={weights:.2f} GB.",
            KV_CACHE_LINE.format(tokens=KV_TOKENS),
            f"Memory pool end. avail mem={left:.2f} GB",
            f"Capture cuda graph begin. This can take up to several minutes. avail mem={left:.2f} GB",
        ])
        if cfg.stall:
            self._stall(started)
            return
        time.sleep(cfg.boot_seconds * 0.2)
        log(f"Capture cuda graph end. Time elapsed: {cfg.boot_seconds * 0.2:.2f} s. mem usage=0.41 GB. "
            f"avail mem={avail - weights - 3.41:.2f} GB.")
        if self.rank == 0:
            self._head_become_ready()
        else:
            self._worker_become_ready()
        self._after_ready()

    def _load_shards(self) -> bool:
        """The checkpoint shards over 80% of the boot time; False when this rank fails half way."""
        cfg, log = self.cfg, self.log
        step = cfg.boot_seconds * 0.8 / SHARDS
        log(f"Loading safetensors checkpoint shards:   0% Completed | 0/{SHARDS} [00:00<?, ?it/s]")
        for shard in range(1, SHARDS + 1):
            time.sleep(step)
            done = step * shard
            log(f"Loading safetensors checkpoint shards: {100 * shard // SHARDS:3d}% Completed | "
                f"{shard}/{SHARDS} [{_mmss(done)}<{_mmss(step * (SHARDS - shard))}, {step:5.2f}s/it]")
            if shard == SHARDS // 2 and self._fails_here() and cfg.fail_after is None:
                why = f"--demo-fail-rank {self.rank} during weight loading"
                crash = vllm_nccl_traceback if cfg.engine == "vllm" else nccl_traceback
                self.fatal(crash(self.rank, False, why), EXIT_SIMULATED)
                return False
        return True

    def _boot_vllm(self) -> None:
        """A vLLM rank: rendezvous at --master-addr/--master-port, load, profile, capture graphs;
        rank 0 then starts its API server once every headless worker reported ready."""
        cfg, log = self.cfg, self.log
        started = time.monotonic()
        if cfg.headless:
            log(f"Launching engine core in headless mode: rank {self.rank} of {cfg.nnodes}, "
                f"head node at tcp://{cfg.dist_host}:{cfg.dist_port}")
        else:
            log(f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model={cfg.model_path!r}, "
                f"served_model_name={cfg.served_model_name}, tensor_parallel_size={cfg.nnodes}, "
                f"max_seq_len={CONTEXT_LEN}, enforce_eager=False")
        init = f"tcp://{cfg.dist_host}:{cfg.dist_port}" if cfg.dist_host else "env://"
        log(f"world_size={cfg.nnodes} rank={self.rank} local_rank=0 distributed_init_method={init} "
            "backend=nccl")
        peers = self._rendezvous()
        if peers is None:
            return
        log.lines([
            RENDEZVOUS_OK_LINE.format(world=cfg.nnodes, rank=self.rank, peers=peers),
            f"rank {self.rank} in world size {cfg.nnodes} is assigned as DP rank 0, PP rank 0, "
            f"TP rank {self.rank}, EP rank {self.rank}",
            f"Starting to load model {cfg.model_path}...",
        ])
        if not self._load_shards():
            return
        load_s = cfg.boot_seconds * 0.8
        log.lines([
            f"Loading weights took {load_s:.2f} seconds",
            f"Model loading took 10.54 GiB and {load_s + 0.05:.2f} seconds",
            "Available KV cache memory: 12.00 GiB",
            VLLM_KV_CACHE_LINE.format(tokens=KV_TOKENS),
            f"Maximum concurrency for {CONTEXT_LEN:,} tokens per request: {KV_TOKENS / CONTEXT_LEN:.2f}x",
        ])
        if cfg.stall:
            self._stall(started)
            return
        time.sleep(cfg.boot_seconds * 0.2)
        log.lines([
            f"Graph capturing finished in {max(1, round(cfg.boot_seconds * 0.2))} secs, took 0.41 GiB",
            f"init engine (profile, create kv cache, warmup model) took {time.monotonic() - started:.2f} "
            "seconds",
        ])
        if self.rank == 0:
            self._vllm_head_become_ready()
        else:
            self._worker_report_ready()
            self.log(VLLM_WORKER_READY_LINE.format(rank=self.rank, world=cfg.nnodes))
        self._after_ready()

    def _vllm_head_become_ready(self) -> None:
        cfg, log = self.cfg, self.log
        self._wait_for_workers()
        log.lines([
            f"Starting vLLM API server 0 on http://{cfg.host}:{cfg.port}",
            "Available routes are:",
            "Route: /health, Methods: GET",
            "Route: /v1/models, Methods: GET",
            "Route: /v1/chat/completions, Methods: POST",
            f"Started server process [{os.getpid()}]",
            "Waiting for application startup.",
        ])
        self.ready.set()
        assert self._http is not None
        self._thread(self._http.serve_forever, "http", 1.0)
        log(VLLM_READY_LINE)

    def _wait_for_workers(self) -> None:
        """Rank 0 becomes ready only once every worker reported ready."""
        cfg, log = self.cfg, self.log
        if cfg.nnodes > 1:
            log(f"DEMO waiting for {cfg.nnodes - 1} worker(s) to report ready")
            with self._cond:
                while not all(peer.ready for peer in self._workers.values()):
                    self._cond.wait()
            log(f"DEMO all {cfg.nnodes} ranks ready")

    def _stall(self, started: float) -> None:
        while not self.exiting:
            self.log(f"Waiting for cuda graph capture to finish... ({ENGINE_NAME} stalled on purpose by "
                     f"--demo-stall; {time.monotonic() - started:.0f} s since boot)")
            time.sleep(STALL_PERIOD)

    def _head_become_ready(self) -> None:
        cfg, log = self.cfg, self.log
        log(MAX_TOKENS_LINE)
        log.lines([
            f"INFO:     Started server process [{os.getpid()}]",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
            f"INFO:     Uvicorn running on http://{cfg.host}:{cfg.port} (Press CTRL+C to quit)",
        ])
        self._wait_for_workers()
        log.lines([
            'INFO:     127.0.0.1:40000 - "GET /get_model_info HTTP/1.1" 200 OK',
            "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0",
            'INFO:     127.0.0.1:40002 - "POST /generate HTTP/1.1" 200 OK',
        ])
        self.ready.set()
        log(READY_LINE)

    def _worker_become_ready(self) -> None:
        self._worker_report_ready()
        self.log(WORKER_READY_LINE.format(port=self.cfg.port))

    def _worker_report_ready(self) -> None:
        if self._head is not None:
            with contextlib.suppress(OSError):  # the head watcher reports a lost connection
                self._head.conn.send_line("ready")
        self.ready.set()

    def _after_ready(self) -> None:
        cfg = self.cfg
        if cfg.tick > 0:
            self._thread(self._ticker, "tick")
        if cfg.flood > 0:
            self._thread(self._flooder, "flood")
        if self._fails_here() and cfg.fail_after is not None:
            time.sleep(cfg.fail_after)
            crash = vllm_nccl_traceback if cfg.engine == "vllm" else nccl_traceback
            self.fatal(crash(self.rank, True, f"--demo-fail-rank {self.rank} "
                             f"--demo-fail-after {cfg.fail_after:g}"), EXIT_SIMULATED)

    def _ticker(self) -> None:
        start = time.monotonic()
        n = 0
        while not self.exiting:
            n += 1
            delay = start + n * self.cfg.tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.log(TICK_LINE.format(n=n))

    def _flooder(self) -> None:
        rate = self.cfg.flood
        cap = max(1, int(rate))  # never more than one second's worth in one write
        start = time.monotonic()
        written = 0
        while not self.exiting:
            elapsed = time.monotonic() - start
            due = int(elapsed * rate)
            if due - written > cap:
                written = due - cap
            if due > written:
                self.log.lines(flood_lines(written, due - written))
                written = due
            next_due = (written + 1) / rate - (time.monotonic() - start)
            time.sleep(min(1.0, max(0.05, next_due)))

    # -- rendezvous -----------------------------------------------------------------------------
    def _rendezvous(self) -> str | None:
        """Form the group; the peers text, or None when this rank is exiting."""
        cfg = self.cfg
        if cfg.nnodes == 1:
            return f"0@{cfg.dist_host or 'local'}"
        if self.rank == 0:
            return self._rendezvous_head()
        return self._rendezvous_worker()

    def _rendezvous_head(self) -> str | None:
        cfg, log = self.cfg, self.log
        assert cfg.dist_port is not None and cfg.dist_host is not None
        family = socket.AF_INET6 if ":" in cfg.dist_host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((_listen_address(cfg.dist_host, family), cfg.dist_port))
            listener.listen(64)
        except OSError as exc:
            listener.close()
            self.fatal([
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                f"network address. port: {cfg.dist_port}, code: -{exc.errno}, message: {exc.strerror}",
                f"DEMO fatal: rendezvous port {cfg.dist_port} unavailable; exiting with code {EXIT_USAGE}",
            ], EXIT_USAGE)
            return None
        listener.settimeout(CONNECT_RETRY)
        log(f"DEMO rendezvous: rank 0 listening on port {cfg.dist_port} for {cfg.nnodes - 1} worker(s)")
        deadline = time.monotonic() + cfg.rendezvous_timeout
        try:
            while True:
                with self._cond:
                    if len(self._workers) == cfg.nnodes - 1:
                        self._formed = True
                        workers = sorted(self._workers.values(), key=lambda p: p.rank)
                        break
                if self.exiting:
                    return None
                if time.monotonic() >= deadline:
                    with self._cond:
                        missing = [r for r in range(1, cfg.nnodes) if r not in self._workers]
                    joined = cfg.nnodes - 1 - len(missing)
                    self.fatal([
                        f"torch.distributed.DistStoreError: Timed out after {cfg.rendezvous_timeout:g} "
                        f"seconds waiting for clients. {joined}/{cfg.nnodes - 1} clients joined.",
                        f"DEMO fatal: rendezvous timed out; missing rank(s) {','.join(map(str, missing))}; "
                        f"exiting with code {EXIT_USAGE}",
                    ], EXIT_USAGE)
                    return None
                try:
                    sock, addr = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    time.sleep(CONNECT_RETRY)
                    continue
                self._thread(self._serve_worker, "peer", sock, str(addr[0]))
        finally:
            listener.close()
        peers = ",".join([f"0@{cfg.dist_host}"] + [f"{p.rank}@{p.addr}" for p in workers])
        for peer in workers:
            with contextlib.suppress(OSError):  # its reader thread reports a lost peer
                peer.conn.send_line(f"go {peers}")
        return peers

    def _serve_worker(self, sock: socket.socket, addr: str) -> None:
        """Head side of one worker connection: handshake, then watch it for the group's lifetime."""
        cfg, log = self.cfg, self.log
        conn = _Conn(sock)
        sock.settimeout(HELLO_TIMEOUT)
        try:
            hello = conn.read_line()
        except OSError:
            hello = None
        parts = (hello or "").split()
        if len(parts) != 3 or parts[0] != "hello" or not parts[1].isdigit() or not parts[2].isdigit():
            log(f"DEMO rendezvous: dropped a connection from {addr} that did not say hello")
            conn.close()
            return
        rank, world = int(parts[1]), int(parts[2])
        error = None
        peer = _Peer(rank, conn, addr)
        with self._cond:
            if world != cfg.nnodes:
                error = f"world size mismatch: rank 0 has --nnodes {cfg.nnodes}, rank {rank} has {world}"
            elif not 0 < rank < cfg.nnodes:
                error = f"rank {rank} is not a worker rank of a {cfg.nnodes}-rank group"
            elif self._formed:
                error = "the group has already formed"
            elif rank in self._workers:
                error = f"rank {rank} is already connected from {self._workers[rank].addr}"
            else:
                self._workers[rank] = peer
                joined = len(self._workers)
                self._cond.notify_all()
        if error is not None:
            log(f"DEMO rendezvous: refused {addr}: {error}")
            with contextlib.suppress(OSError):
                conn.send_line(f"error {error}")
            conn.close()
            return
        log(f"DEMO rendezvous: rank {rank} joined from {addr} ({joined}/{cfg.nnodes - 1} workers)")
        sock.settimeout(None)
        while True:
            try:
                line = conn.read_line()
            except OSError:
                line = None
            if line is None:
                break
            if line == "ready":
                with self._cond:
                    peer.ready = True
                    self._cond.notify_all()
                log(f"DEMO rank {rank} reports ready")
            elif line == "bye":
                peer.bye = True
        with self._cond:
            formed = self._formed
            if not formed and self._workers.get(rank) is peer:
                del self._workers[rank]
        conn.close()
        if not formed:
            log(f"DEMO rendezvous: rank {rank} left before the group formed; waiting for it again")
            return
        self._peer_lost(rank, peer.bye)

    def _rendezvous_worker(self) -> str | None:
        cfg, log = self.cfg, self.log
        host, port = cfg.dist_host, cfg.dist_port
        assert host is not None and port is not None
        log(f"DEMO rendezvous: rank {self.rank} connecting to {host}:{port}")
        deadline = time.monotonic() + cfg.rendezvous_timeout
        last_error = "no attempt"
        reported = 0.0
        while not self.exiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.fatal([
                    f"torch.distributed.DistNetworkError: The client socket has timed out after "
                    f"{cfg.rendezvous_timeout:g}s while trying to connect to ({host}, {port}). "
                    f"Last error: {last_error}",
                    f"DEMO fatal: rendezvous with rank 0 at {host}:{port} failed; "
                    f"exiting with code {EXIT_USAGE}",
                ], EXIT_USAGE)
                return None
            try:
                sock = socket.create_connection((host, port), timeout=min(2.0, max(0.05, remaining)))
            except OSError as exc:
                last_error = exc.strerror or str(exc)
                now = time.monotonic()
                if now - reported >= 10.0:
                    reported = now
                    log(f"DEMO rendezvous: rank 0 at {host}:{port} not reachable yet ({last_error}); "
                        f"retrying every {CONNECT_RETRY:g} s")
                time.sleep(CONNECT_RETRY)
                continue
            sock.settimeout(None)
            conn = _Conn(sock)
            peer = _Peer(0, conn, host)
            self._head = peer
            try:
                conn.send_line(f"hello {self.rank} {cfg.nnodes}")
                answer = conn.read_line()
            except OSError:
                answer = None
            if answer is not None and answer.startswith("go "):
                self._thread(self._watch_head, "head", peer)
                return answer[3:]
            self._head = None
            conn.close()
            if answer is not None and answer.startswith("error "):
                self.fatal([f"DEMO fatal: rank 0 refused rank {self.rank}: {answer[6:]}; "
                            f"exiting with code {EXIT_USAGE}"], EXIT_USAGE)
                return None
            if answer is not None and answer != "bye":
                self.fatal([f"DEMO fatal: rank 0 said {answer!r} during rendezvous; "
                            f"exiting with code {EXIT_USAGE}"], EXIT_USAGE)
                return None
            last_error = "rank 0 closed the connection before the group formed"
            log(f"DEMO rendezvous: lost rank 0 at {host}:{port} before the group formed; retrying")
            time.sleep(CONNECT_RETRY)
        return None

    def _watch_head(self, peer: _Peer) -> None:
        while True:
            try:
                line = peer.conn.read_line()
            except OSError:
                line = None
            if line is None:
                break
            if line == "bye":
                peer.bye = True
        peer.conn.close()
        self._peer_lost(0, peer.bye)

    def _peer_lost(self, rank: int, said_bye: bool) -> None:
        """A rank of the formed group is gone: the group falls apart (exit 4)."""
        if self.exiting:
            return
        if said_bye:
            time.sleep(BYE_GRACE)  # everyone may be stopping: give our own SIGTERM a chance
            if self.exiting:
                return
        how = "shut down" if said_bye else "died"
        if self.rank == 0:
            first = (
                "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
                "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600000 milliseconds "
                "before timing out. "
                f"({ENGINE_NAME}: rank {rank} {how})"
            )
        else:
            host, port = self.cfg.dist_host, self.cfg.dist_port
            first = (
                f"[rank{self.rank}]: [PG ID 0 PG GUID 0(default_pg) Rank {self.rank}] Failed to check the "
                f"\"should dump\" flag on TCPStore at {host}:{port} (maybe TCPStore server has shut down too "
                "early), with error: Failed to recv, got 0 bytes. Connection was likely closed. "
                f"Did the remote server shutdown or crash? ({ENGINE_NAME}: rank 0 {how})"
            )
        self.fatal([first, f"DEMO fatal: the TP group fell apart (rank {rank} {how}); "
                           f"exiting with code {EXIT_GROUP_LOST}"], EXIT_GROUP_LOST)

    # -- API ------------------------------------------------------------------------------------
    def model_card(self) -> dict[str, Any]:
        return {
            "id": self.cfg.served_model_name,
            "object": "model",
            "created": self.created,
            "owned_by": OWNED_BY,
            "root": self.cfg.model_path,
            "max_model_len": CONTEXT_LEN,
        }

    def model_info(self) -> dict[str, Any]:
        return {
            "model_path": self.cfg.model_path,
            "tokenizer_path": self.cfg.model_path,
            "served_model_name": self.cfg.served_model_name,
            "is_generation": True,
            "weight_version": "default",
            "engine": ENGINE_NAME,
            "tp_size": self.cfg.nnodes,
        }

    @staticmethod
    def parse_chat_request(raw: bytes) -> _ChatRequest:
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            raise _BadRequest(f"request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _BadRequest("request body must be a JSON object")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("'messages' must be a non-empty list")
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            max_tokens = body.get("max_completion_tokens")
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise _BadRequest("'max_tokens' must be a positive integer")
        prompt = 0
        for message in messages:
            content = message.get("content", "") if isinstance(message, dict) else message
            prompt += 4 + len(str(content).split())
        stream = bool(body.get("stream", False))
        return _ChatRequest(stream=stream, max_tokens=max_tokens, prompt_tokens=prompt)

    def serve_chat(self, handler: _Handler, request: _ChatRequest) -> None:
        with self._req_lock:
            self._req_count += 1
            self._running += 1
            number, running = self._req_count, self._running
        rid = f"chatcmpl-demo-{self.created:x}-{number}"
        self.log(f"Prefill batch. #new-seq: 1, #new-token: {request.prompt_tokens}, #cached-token: 0, "
                 f"token usage: 0.00, #running-req: {running - 1}, #queue-req: 0")
        all_tokens = demo_tokens()
        tokens = all_tokens[: request.max_tokens]
        finish = "length" if len(all_tokens) > request.max_tokens else "stop"
        usage = {
            "prompt_tokens": request.prompt_tokens,
            "completion_tokens": len(tokens),
            "total_tokens": request.prompt_tokens + len(tokens),
        }
        base = {"id": rid, "created": int(time.time()), "model": self.cfg.served_model_name}
        started = time.monotonic()
        try:
            if request.stream:
                self._stream(handler, base, tokens, finish, usage)
            else:
                time.sleep(len(tokens) / TOKENS_PER_SECOND)
                handler._send_json(200, {
                    **base,
                    "object": "chat.completion",
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(tokens)},
                        "logprobs": None,
                        "finish_reason": finish,
                    }],
                    "usage": usage,
                })
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            handler.close_connection = True
            self.log(f"Abort request {rid}: the client went away")
        else:
            elapsed = max(time.monotonic() - started, 1e-3)
            self.log(f"Decode batch. #running-req: {running}, #token: {usage['total_tokens']}, token usage: "
                     f"{usage['total_tokens'] / KV_TOKENS:.2f}, gen throughput (token/s): "
                     f"{len(tokens) / elapsed:.2f}, #queue-req: 0")
        finally:
            with self._req_lock:
                self._running -= 1

    @staticmethod
    def _stream(handler: _Handler, base: dict[str, Any], tokens: list[str], finish: str,
                usage: dict[str, int]) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def send(payload: bytes) -> None:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

        def chunk(delta: dict[str, str], reason: str | None, extra: dict[str, Any] | None = None) -> None:
            body = {**base, "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]}
            if extra:
                body.update(extra)
            send(b"data: " + json.dumps(body).encode() + b"\n\n")

        chunk({"role": "assistant", "content": ""}, None)
        start = time.monotonic()
        for i, token in enumerate(tokens):
            delay = start + (i + 1) / TOKENS_PER_SECOND - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            chunk({"content": token}, None)
        chunk({}, finish, {"usage": usage})
        send(b"data: [DONE]\n\n")
        handler.wfile.write(b"0\r\n\r\n")


def _exit_soon(code: int, delay: float) -> None:
    time.sleep(delay)
    os._exit(code)


def _mmss(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and run one demo rank; returns only for --help (argparse exits)."""
    cfg = parse_config(argv)
    return Engine(cfg).run()


if __name__ == "__main__":
    sys.exit(main())
