"""The demo as an SGLang rank: ``[time TP<rank>] `` lines, ``server_args=ServerArgs(...)`` with
every field, ``/health`` (503) served while booting, rank 0's ready line once every worker
reported ready, and with ``--enable-metrics`` rank 0's ``/metrics`` in SGLang's families."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from .config import Config
from .fields import credentials, demo_switches, dump_changes, engine_fields, py_repr
from .lines import CONTEXT_LEN, KV_TOKENS, RENDEZVOUS_OK_LINE, SGLANG, EngineLines
from .load import Reading
from .log import LogStyle
from .metrics import Exposition

if TYPE_CHECKING:
    from .rank import Rank

KV_CACHE_LINE = "KV cache ready: #tokens={tokens}, K size: 1.50 GB, V size: 1.50 GB"
MAX_TOKENS_LINE = (
    "max_total_num_tokens=65536, chunked_prefill_size=4096, max_prefill_tokens=16384, "
    "max_running_requests={max_running}, context_len=32768"
)

# SGLang's TokenizerMetricsCollector's default buckets (seconds)
BUCKETS: dict[str, tuple[float, ...]] = {
    "ttft": (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400),
    "e2e": (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800),
}
DRAFT_TOKENS = 4
"""Tokens drafted a step when ``--speculative-num-draft-tokens`` does not say."""
ACCEPTED = 0.7
"""The share of the drafted tokens after the first that the demo's target model accepts."""


def accept_length(cfg: Config, generated: int) -> float:
    """The average tokens accepted a verify step: 0 before any decoding; then about
    ``1 + ACCEPTED * (drafts - 1)``, a little up and down with the tokens generated."""
    if not generated:
        return 0.0
    drafts = cfg.speculative_draft_tokens or DRAFT_TOKENS
    swing = 0.9 + 0.05 * ((generated // 64) % 5)
    return round(min(float(drafts), (1 + ACCEPTED * (drafts - 1)) * swing), 3)


def metrics_text(cfg: Config, reading: Reading) -> str:
    """Rank 0's ``/metrics``: the scheduler's gauges and the tokenizer manager's counters and
    histograms, labelled with the served model's name, as SGLang's collectors name them."""
    out = Exposition({"model_name": cfg.served_model_name})
    batch = reading.batch
    out.gauge("sglang:num_running_reqs", "The number of running requests.", batch.running)
    out.gauge("sglang:num_used_tokens", "The number of used tokens.", batch.used_tokens)
    out.gauge("sglang:token_usage", "The token usage.", round(batch.used_tokens / KV_TOKENS, 6))
    out.gauge("sglang:gen_throughput", "The generation throughput (token/s).", round(batch.throughput, 3))
    out.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", batch.queued)
    hit = reading.cached_tokens / reading.prompt_tokens if reading.prompt_tokens else 0.0
    out.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", round(hit, 6))
    if cfg.speculative_algorithm:
        out.gauge("sglang:spec_accept_length", "The average acceptance length of speculative decoding.",
                  accept_length(cfg, reading.generation_tokens))
    out.counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", reading.prompt_tokens)
    out.counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
                reading.generation_tokens)
    out.counter("sglang:cached_tokens_total", "Number of cached prompt tokens.", reading.cached_tokens)
    out.counter("sglang:num_requests_total", "Number of requests processed.", reading.requests)
    out.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                  reading.histograms["ttft"])
    out.histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                  reading.histograms["e2e"])
    return out.text()


def dump(cfg: Config, env: dict[str, str] | None = None) -> str | None:
    """``server_args=ServerArgs(...)``: every field of SGLang's table, as SGLang logs it."""
    found = engine_fields("sglang", cfg.argv)
    if found is None:
        return None
    _version, values = found
    # ServerArgs.__post_init__ fills these from the model path
    for dest in ("tokenizer_path", "served_model_name"):
        if values.get(dest) is None:
            values[dest] = cfg.model_path
    values.update(demo_switches(cfg))
    creds = credentials(cfg)
    for k in creds:
        values.pop(k, None)
    clamp, drop = dump_changes(cfg.node_rank, env)
    values.update(clamp)
    body = ", ".join(f"{k}={py_repr(v)}" for k, v in values.items() if k not in drop)
    body += "".join(f", {k}={v!r}" for k, v in creds.items())
    return f"server_args=ServerArgs({body})"


def _short_dump(cfg: Config) -> str:
    """The dump without ``fields.json``: the fields the demo itself knows."""
    dist = f"{cfg.dist_host}:{cfg.dist_port}" if cfg.dist_host else None
    return (
        f"server_args=ServerArgs(model_path={cfg.model_path!r}, tokenizer_path={cfg.model_path!r}, "
        f"served_model_name={cfg.served_model_name!r}, dtype='bfloat16', tp_size={cfg.nnodes}, "
        f"nnodes={cfg.nnodes}, node_rank={cfg.node_rank}, dist_init_addr={dist!r}, "
        f"host={cfg.host!r}, port={cfg.port}, context_length={CONTEXT_LEN}, "
        f"chunked_prefill_size=4096, max_running_requests={cfg.max_running}, "
        f"demo_boot_seconds={cfg.boot_seconds}, demo_fail_rank={cfg.fail_rank}, "
        f"demo_fail_after={cfg.fail_after}, demo_stall={cfg.stall}, demo_flood={cfg.flood}, "
        f"demo_tick={cfg.tick}"
        + "".join(f", {k}={v!r}" for k, v in credentials(cfg).items()) + ")")


class SGLangRank:
    """The SGLang personality (``rank.Personality``)."""

    name = "sglang"
    lines: EngineLines = SGLANG
    serves_while_booting = True
    buckets = BUCKETS

    def metrics(self, cfg: Config, reading: Reading) -> str | None:
        """None without ``--enable-metrics``: SGLang then mounts no ``/metrics``."""
        return metrics_text(cfg, reading) if cfg.enable_metrics else None

    def log_style(self, rank: int) -> LogStyle:
        stamp = "%Y-%m-%d %H:%M:%S"
        return LogStyle("[", stamp, f" TP{rank}] ", "[", stamp, "] ")

    def banner(self, cfg: Config) -> list[str]:
        return [dump(cfg) or _short_dump(cfg)]

    def boot(self, rank: Rank) -> None:
        cfg, log = rank.cfg, rank.log
        started = time.monotonic()
        log(f"DEMO health server listening on http://{cfg.host}:{cfg.port} (503 until ready)")
        log("Init torch distributed begin.")
        peers = rank.group.form()
        if peers is None:
            return
        log.lines([
            RENDEZVOUS_OK_LINE.format(world=cfg.nnodes, rank=rank.rank, peers=peers),
            f"Init torch distributed ends. mem usage={0.03 * cfg.nnodes:.2f} GB",
        ])
        avail = 119.53 - 0.07 * rank.rank
        log(f"Load weight begin. avail mem={avail:.2f} GB")
        if not rank.nccl_line() or not rank.load_shards():
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
            rank.stall(started)
            return
        time.sleep(cfg.boot_seconds * 0.2)
        log(f"Capture cuda graph end. Time elapsed: {cfg.boot_seconds * 0.2:.2f} s. mem usage=0.41 GB. "
            f"avail mem={avail - weights - 3.41:.2f} GB.")
        if rank.rank == 0:
            self._head_ready(rank)
        else:
            rank.worker_ready()
            log(self.lines.worker_ready.format(port=cfg.port))
        rank.after_ready()

    def _head_ready(self, rank: Rank) -> None:
        cfg, log = rank.cfg, rank.log
        log(MAX_TOKENS_LINE.format(max_running=cfg.max_running))
        log.lines([
            f"INFO:     Started server process [{os.getpid()}]",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
            f"INFO:     Uvicorn running on http://{cfg.host}:{cfg.port} (Press CTRL+C to quit)",
        ])
        rank.group.wait_for_workers()
        log.lines([
            'INFO:     127.0.0.1:40000 - "GET /get_model_info HTTP/1.1" 200 OK',
            "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0",
            'INFO:     127.0.0.1:40002 - "POST /generate HTTP/1.1" 200 OK',
        ])
        rank.ready.set()
        log(self.lines.ready)


PERSONALITY = SGLangRank()
