"""The command line and environment of one demo rank, read into one ``Config``.

SGLang's rank flags or vLLM's (the flags decide which engine it imitates; ``--demo-engine`` or
``SPARKTUI_DEMO_ENGINE`` forces one), every other engine flag taken and ignored, and the demo's
own switches: a ``--demo-*`` flag, else its ``SPARKTUI_DEMO_*`` variable (a recipe's ``[env]``
table sets those), else the default.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .lines import ENGINE_NAME
from .memory import parse_size


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
    hang_rank: int | None = None  # this rank goes silent after its NCCL line (--demo-hang-rank)
    alloc: int = 0  # bytes to take in steps from weight loading on, and hold (--demo-alloc)
    alloc_step: int = 64 * 2**20
    alloc_every: float = 0.5
    alloc_rank: int | None = None  # only this rank allocates (default: every rank)
    alloc_once: str | None = None  # a file: allocate only where it is absent, made first
    max_running: int = 4  # requests decoded at once (--max-running-requests; vLLM --max-num-seqs)
    enable_metrics: bool = False  # SGLang --enable-metrics: rank 0 serves /metrics (vLLM: always)
    speculative_algorithm: str | None = None  # SGLang --speculative-algorithm: an accept length
    speculative_draft_tokens: int | None = None  # SGLang --speculative-num-draft-tokens


_ENV = {
    "boot_seconds": "SPARKTUI_DEMO_BOOT_SECONDS",
    "fail_rank": "SPARKTUI_DEMO_FAIL_RANK",
    "fail_after": "SPARKTUI_DEMO_FAIL_AFTER",
    "stall": "SPARKTUI_DEMO_STALL",
    "flood": "SPARKTUI_DEMO_FLOOD",
    "tick": "SPARKTUI_DEMO_TICK",
    "rendezvous_timeout": "SPARKTUI_DEMO_RENDEZVOUS_TIMEOUT",
    "engine": "SPARKTUI_DEMO_ENGINE",
    "hang_rank": "SPARKTUI_DEMO_HANG_RANK",
    "alloc": "SPARKTUI_DEMO_ALLOC",
    "alloc_step": "SPARKTUI_DEMO_ALLOC_STEP",
    "alloc_every": "SPARKTUI_DEMO_ALLOC_EVERY",
    "alloc_rank": "SPARKTUI_DEMO_ALLOC_RANK",
    "alloc_once": "SPARKTUI_DEMO_ALLOC_ONCE",
}

VLLM_MASTER_PORT = 29501  # vLLM's default --master-port
DEFAULT_MAX_RUNNING = 4
"""Requests decoded at once when the command line does not say: small, so that a few
concurrent requests already queue (the real engines size it from the memory)."""
_Rendezvous = Callable[[dict[str, Any], argparse.ArgumentParser, int], tuple[str | None, int | None]]


def _sglang_rendezvous(values: dict[str, Any], parser: argparse.ArgumentParser,
                       nnodes: int) -> tuple[str | None, int | None]:
    """``--dist-init-addr HOST:PORT``, needed by more than one rank."""
    addr: str | None = values["dist_init_addr"]
    if addr:
        host_part, sep, port_part = addr.rpartition(":")
        if not sep or not host_part or not port_part.isdigit() or not 0 < int(port_part) < 65536:
            parser.error(f"--dist-init-addr {addr!r} is not HOST:PORT")
        return host_part.strip("[]"), int(port_part)
    if nnodes > 1:
        parser.error("--dist-init-addr HOST:PORT is required when --nnodes > 1")
    return None, None


def _vllm_rendezvous(values: dict[str, Any], parser: argparse.ArgumentParser,
                     nnodes: int) -> tuple[str | None, int | None]:
    """``--master-addr``/``--master-port``, vLLM's defaults (127.0.0.1, 29501) for what is not given."""
    if not (nnodes > 1 or values["master_addr"] or values["master_port"] is not None):
        return None, None
    port: int = VLLM_MASTER_PORT if values["master_port"] is None else values["master_port"]
    if not 0 < port < 65536:
        parser.error(f"--master-port {port} is not a TCP port")
    return values["master_addr"] or "127.0.0.1", port


class _RankFlags(NamedTuple):
    """One engine's rank flags, as the demo reads them."""

    only: tuple[str, ...]  # flags the other engine does not know (``--model``: SGLang knows it too)
    model: tuple[str, ...]  # where the model comes from, first given wins
    default_port: int
    workers_headless: bool  # ranks > 0 must be --headless
    rendezvous: _Rendezvous


_FLAGS = {
    "sglang": _RankFlags(("--model-path", "--dist-init-addr"), ("--model-path", "--model"), 30000, False,
                         _sglang_rendezvous),
    "vllm": _RankFlags(("--model", "--master-addr", "--master-port", "--headless"), ("--model",), 8000, True,
                       _vllm_rendezvous),
}
ENGINES = tuple(_FLAGS)

_HELP_EPILOG = """\
The engine it imitates follows from the flags: SGLang's (--model-path, --dist-init-addr) or
vLLM's (--model, --master-addr, --master-port, --headless); --demo-engine forces one.
Every other --flag [value] (the rest of the engine's flags) is accepted and ignored.

Each demo switch can also come from the environment (a flag wins):
  SPARKTUI_DEMO_BOOT_SECONDS, SPARKTUI_DEMO_FAIL_RANK, SPARKTUI_DEMO_FAIL_AFTER,
  SPARKTUI_DEMO_STALL=1, SPARKTUI_DEMO_FLOOD, SPARKTUI_DEMO_TICK, SPARKTUI_DEMO_RENDEZVOUS_TIMEOUT,
  SPARKTUI_DEMO_ENGINE, SPARKTUI_DEMO_HANG_RANK, SPARKTUI_DEMO_ALLOC, SPARKTUI_DEMO_ALLOC_STEP,
  SPARKTUI_DEMO_ALLOC_EVERY, SPARKTUI_DEMO_ALLOC_RANK, SPARKTUI_DEMO_ALLOC_ONCE
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
    act = parser.add_argument_group("engine flags the demo acts on (the others are ignored)")
    act.add_argument("--max-running-requests", type=int, default=None, metavar="N",
                     help=f"SGLang: requests decoded at once, the rest queue (default {DEFAULT_MAX_RUNNING})")
    act.add_argument("--max-num-seqs", type=int, default=None, metavar="N",
                     help=f"vLLM: requests decoded at once, the rest wait (default {DEFAULT_MAX_RUNNING})")
    act.add_argument("--enable-metrics", action="store_true", default=False,
                     help="SGLang: rank 0 serves /metrics (vLLM's always does)")
    act.add_argument("--speculative-algorithm", default=None, metavar="NAME",
                     help="SGLang: speculative decoding; /metrics then has an accept length")
    act.add_argument("--speculative-num-draft-tokens", type=int, default=None, metavar="N",
                     help="SGLang: tokens drafted a step (the accept length's bound)")
    demo = parser.add_argument_group("demo switches")
    demo.add_argument("--demo-engine", choices=ENGINES, default=None,
                      help="imitate this engine (default: follows from the flags)")
    demo.add_argument("--demo-boot-seconds", metavar="S", default=None, help="simulated load time (2.0)")
    demo.add_argument("--demo-fail-rank", metavar="R", default=None, help="rank R crashes mid-boot (exit 3)")
    demo.add_argument("--demo-fail-after", metavar="S", default=None, help="crash S seconds after ready")
    demo.add_argument("--demo-stall", action="store_true", default=None, help="never become ready")
    demo.add_argument("--demo-hang-rank", metavar="R", default=None,
                      help="rank R goes silent after its NCCL line, the others go on")
    demo.add_argument("--demo-alloc", metavar="SIZE", default=None,
                      help="from weight loading on, take SIZE of memory in steps and hold it")
    demo.add_argument("--demo-alloc-step", metavar="SIZE", default=None, help="one step (64M)")
    demo.add_argument("--demo-alloc-every", metavar="S", default=None, help="a step every S s (0.5)")
    demo.add_argument("--demo-alloc-rank", metavar="R", default=None,
                      help="only rank R allocates (default: every rank)")
    demo.add_argument("--demo-alloc-once", metavar="FILE", default=None,
                      help="allocate only when FILE is absent (made first): a spike that a "
                           "restart does not repeat")
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
    only = {name: [f for f in flags.only if given(f) and f != "--model"] for name, flags in _FLAGS.items()}
    if chosen is not None:
        mode = chosen[1]
    elif only["vllm"] or (given("--model") and not only["sglang"]):
        mode = "vllm"
    else:
        mode = "sglang"
    flags = _FLAGS[mode]
    others = [f for name, found in only.items() if name != mode for f in found]
    if others:
        parser.error(f"{' '.join(others)}: rank flag(s) of the other engine; this rank imitates {mode} "
                     "(its flags, or --demo-engine, decide)")
    model = next((v for f in flags.model if (v := values[f[2:].replace("-", "_")])), None)
    if not model:
        parser.error(f"the following arguments are required: {flags.model[0]}")

    nnodes: int = values["nnodes"]
    rank: int = values["node_rank"]
    if nnodes < 1:
        parser.error("--nnodes must be at least 1")
    if not 0 <= rank < nnodes:
        parser.error(f"--node-rank {rank} is out of range for --nnodes {nnodes}")
    port: int = flags.default_port if values["port"] is None else values["port"]
    if not 0 <= port <= 65535:
        parser.error(f"--port {port} is not a TCP port")
    headless: bool = values["headless"]
    if headless and rank == 0:
        parser.error("--headless on rank 0: the head serves the API (vLLM workers on ranks > 0 run headless)")
    if flags.workers_headless and rank > 0 and not headless:
        parser.error(f"--node-rank {rank} without --headless: with vLLM's multi-node flags only rank 0 "
                     "serves the API; every other rank runs --headless")
    dist_host, dist_port = flags.rendezvous(values, parser, nnodes)
    running_flag = "--max-running-requests" if mode == "sglang" else "--max-num-seqs"
    max_running = values[running_flag[2:].replace("-", "_")]
    max_running = DEFAULT_MAX_RUNNING if max_running is None else max_running
    if max_running < 1:
        parser.error(f"{running_flag} {max_running}: at least 1 request must run")
    draft = values["speculative_num_draft_tokens"]
    if draft is not None and draft < 1:
        parser.error(f"--speculative-num-draft-tokens {draft} must be at least 1")

    fail_rank = num("fail_rank", None, integer=True)
    fail_after = num("fail_after", None)
    hang_rank = num("hang_rank", None, integer=True)
    def size(key: str, default: int) -> int:
        found = pick(key)
        if found is None:
            return default
        try:
            return parse_size(found[1])
        except ValueError as exc:
            parser.error(f"{found[0]}: {exc}")

    alloc, alloc_step = size("alloc", 0), size("alloc_step", 64 * 2**20)
    if alloc_step <= 0:
        parser.error("--demo-alloc-step must be above 0")
    alloc_rank = num("alloc_rank", None, integer=True)
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
        hang_rank=None if hang_rank is None else int(hang_rank),
        alloc=alloc,
        alloc_step=alloc_step,
        alloc_every=num("alloc_every", 0.5) or 0.0,
        alloc_rank=None if alloc_rank is None else int(alloc_rank),
        alloc_once=found[1] if (found := pick("alloc_once")) else None,
        max_running=max_running,
        enable_metrics=values["enable_metrics"],
        speculative_algorithm=values["speculative_algorithm"],
        speculative_draft_tokens=draft,
    )
