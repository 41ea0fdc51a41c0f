"""The demo as a vLLM rank (``--distributed-backend mp``): ``(Worker_TP<rank> pid=<pid>) INFO``
lines, ``non-default args: {...}`` on rank 0 only, ``--headless`` workers that open no port, and
rank 0's API server bound at start but serving only from "Application startup complete." on,
once every worker reported ready, ``/metrics`` among its routes (always on, as vLLM's)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from .config import Config
from .fields import credentials, demo_switches, dump_changes, engine_table, table_fields
from .lines import CONTEXT_LEN, KV_TOKENS, RENDEZVOUS_OK_LINE, VLLM, EngineLines
from .load import Reading
from .log import LogStyle
from .metrics import Exposition

if TYPE_CHECKING:
    from .rank import Rank

VERSION = "0.10.1.1+sparktui.demo"
KV_CACHE_LINE = "GPU KV cache size: {tokens:,} tokens"

# vLLM v1's PrometheusStatLogger's buckets (seconds)
BUCKETS: dict[str, tuple[float, ...]] = {
    "ttft": (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    "tpot": (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
             20.0, 40.0, 80.0),
    "e2e": (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
            240.0, 480.0, 960.0, 1920.0, 7680.0),
}


def metrics_text(cfg: Config, reading: Reading) -> str:
    """Rank 0's ``/metrics``: the scheduler's gauges, the token counters and the latency
    histograms of engine 0, as vLLM's Prometheus logger names them. The demo never preempts
    (its KV cache never fills): the preemption counter stays 0."""
    out = Exposition({"model_name": cfg.served_model_name, "engine": "0"})
    batch = reading.batch
    out.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", batch.running)
    out.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", batch.queued)
    out.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
              round(batch.used_tokens / KV_TOKENS, 6))
    out.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", 0)
    out.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", reading.prompt_tokens)
    out.counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
                reading.generation_tokens)
    out.counter("vllm:prefix_cache_queries_total",
                "Prefix cache queries, in terms of number of queried tokens.", reading.prompt_tokens)
    out.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
                reading.cached_tokens)
    out.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                  reading.histograms["ttft"])
    out.histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                  reading.histograms["tpot"])
    out.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                  reading.histograms["e2e"])
    return out.text()


def _credentials(cfg: Config) -> dict[str, Any]:
    """The credentials as vLLM keeps them (the API key in a list)."""
    return {k: ([v] if k == "api_key" else v) for k, v in credentials(cfg).items()}


def dump(cfg: Config, env: dict[str, str] | None = None) -> str | None:
    """``non-default args: {...}``: the fields of vLLM's table whose value is not the default
    (``get_non_default_args``), as vLLM logs them."""
    table = engine_table("vllm")
    if table is None:
        return None
    defaults = table_fields(table, ())
    out = {k: v for k, v in table_fields(table, cfg.argv).items() if v != defaults.get(k)}
    out.update({k: v for k, v in demo_switches(cfg).items() if v not in (None, False, 0.0)})
    creds = credentials(cfg)
    for k in creds:
        out.pop(k, None)
    clamp, drop = dump_changes(cfg.node_rank, env)
    out.update(clamp)
    out = {k: v for k, v in out.items() if k not in drop}
    out.update(_credentials(cfg))
    return f"non-default args: {out!r}"


def _short_dump(cfg: Config) -> str:
    """The dump without ``fields.json``: the fields the demo itself knows."""
    args: dict[str, Any] = {
        "model": cfg.model_path, "served_model_name": [cfg.served_model_name], "host": cfg.host,
        "port": cfg.port, "tensor_parallel_size": cfg.nnodes, "nnodes": cfg.nnodes,
        "node_rank": cfg.node_rank, "master_addr": cfg.dist_host, "master_port": cfg.dist_port,
        "headless": cfg.headless, **demo_switches(cfg), **_credentials(cfg),
    }
    return f"non-default args: {args!r}"


class VLLMRank:
    """The vLLM personality (``rank.Personality``)."""

    name = "vllm"
    lines: EngineLines = VLLM
    serves_while_booting = False
    buckets = BUCKETS

    def metrics(self, cfg: Config, reading: Reading) -> str | None:
        return metrics_text(cfg, reading)

    def log_style(self, rank: int) -> LogStyle:
        pid = os.getpid()
        return LogStyle(f"(Worker_TP{rank} pid={pid}) INFO ", "%m-%d %H:%M:%S", " [demo] ",
                        f"(APIServer pid={pid}) ", "", "")

    def banner(self, cfg: Config) -> list[str]:
        if cfg.headless:  # vLLM's API server setup logs the args; a headless worker does not
            return [f"vLLM version {VERSION}"]
        return [f"vLLM API server version {VERSION}", dump(cfg) or _short_dump(cfg)]

    def boot(self, rank: Rank) -> None:
        """Rendezvous at --master-addr/--master-port, load, profile, capture graphs; rank 0 then
        starts its API server once every headless worker reported ready."""
        cfg, log = rank.cfg, rank.log
        started = time.monotonic()
        if cfg.headless:
            log(f"Launching engine core in headless mode: rank {rank.rank} of {cfg.nnodes}, "
                f"head node at tcp://{cfg.dist_host}:{cfg.dist_port}")
        else:
            log(f"Initializing a V1 LLM engine (v{VERSION}) with config: model={cfg.model_path!r}, "
                f"served_model_name={cfg.served_model_name}, tensor_parallel_size={cfg.nnodes}, "
                f"max_seq_len={CONTEXT_LEN}, enforce_eager=False")
        init = f"tcp://{cfg.dist_host}:{cfg.dist_port}" if cfg.dist_host else "env://"
        log(f"world_size={cfg.nnodes} rank={rank.rank} local_rank=0 distributed_init_method={init} "
            "backend=nccl")
        peers = rank.group.form()
        if peers is None:
            return
        log.lines([
            RENDEZVOUS_OK_LINE.format(world=cfg.nnodes, rank=rank.rank, peers=peers),
            f"rank {rank.rank} in world size {cfg.nnodes} is assigned as DP rank 0, PP rank 0, "
            f"TP rank {rank.rank}, EP rank {rank.rank}",
            f"Starting to load model {cfg.model_path}...",
        ])
        if not rank.nccl_line() or not rank.load_shards():
            return
        load_s = cfg.boot_seconds * 0.8
        log.lines([
            f"Loading weights took {load_s:.2f} seconds",
            f"Model loading took 10.54 GiB and {load_s + 0.05:.2f} seconds",
            "Available KV cache memory: 12.00 GiB",
            KV_CACHE_LINE.format(tokens=KV_TOKENS),
            f"Maximum concurrency for {CONTEXT_LEN:,} tokens per request: {KV_TOKENS / CONTEXT_LEN:.2f}x",
        ])
        if cfg.stall:
            rank.stall(started)
            return
        time.sleep(cfg.boot_seconds * 0.2)
        log.lines([
            f"Graph capturing finished in {max(1, round(cfg.boot_seconds * 0.2))} secs, took 0.41 GiB",
            f"init engine (profile, create kv cache, warmup model) took {time.monotonic() - started:.2f} "
            "seconds",
        ])
        if rank.rank == 0:
            self._head_ready(rank)
        else:
            rank.worker_ready()
            log(self.lines.worker_ready.format(rank=rank.rank, world=cfg.nnodes))
        rank.after_ready()

    def _head_ready(self, rank: Rank) -> None:
        cfg, log = rank.cfg, rank.log
        rank.group.wait_for_workers()
        log.lines([
            f"Starting vLLM API server 0 on http://{cfg.host}:{cfg.port}",
            "Available routes are:",
            "Route: /health, Methods: GET",
            "Route: /v1/models, Methods: GET",
            "Route: /v1/chat/completions, Methods: POST",
            f"Started server process [{os.getpid()}]",
            "Waiting for application startup.",
        ])
        rank.ready.set()
        rank.serve_http()
        log(self.lines.ready)


PERSONALITY = VLLMRank()
