"""SGLang: every rank gets the rendezvous flags; rank 0 serves the API, and non-zero node ranks
run SGLang's small health server on the same port."""

from __future__ import annotations

from sparktui.core.engines.base import (
    CANARY_PROMPT,
    Completion,
    Launch,
    MemoryFraction,
    Probe,
    ReadyFacts,
)
from sparktui.core.engines.dumps import ArgsDump
from sparktui.core.engines.requestlog import UVICORN_ACCESS, RequestLines
from sparktui.core.metrics import MetricSeries, MetricsSpec, load_series

# SGLang's loggers print "[%(asctime)s<prefix>] ": the HTTP server's uvicorn loggers
# "[2026-12-01 12:00:00] " (set_uvicorn_logging_configs), the other processes a date and time
# with " TP0", " DP0 TP0" and the like after it (configure_logger; older builds omit the year).
_PREFIX = r"\[(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [\w ]+)?\] "
_REQUESTS = RequestLines(_PREFIX, (
    UVICORN_ACCESS,
    # --log-requests (RequestLogger): the request object with its text, as "Receive: obj=...",
    # "Receive OpenAI: obj=..." (the OpenAI body) and "Finish: obj=..., out=..." (with the reply).
    r"(?:Receive(?: OpenAI)?|Finish): obj=",
    # --log-requests-format json: one json.dumps per line, the event second.
    r'\{"timestamp": "[^"]*", "event": "request\.',
))

# SGLang's /metrics (--enable-metrics; prometheus_client in multiprocess mode): its schedulers'
# gauges (gen_throughput: the tokens/s it logs after its decode batches), the tokenizer manager's
# token counters and TTFT histogram, labelled model_name (and engine_type, tp_rank, ...).
METRICS = MetricsSpec(flag="--enable-metrics", series=(
    *load_series(throughput=MetricSeries("throughput", "sglang:gen_throughput", "gauge"),
                 running="sglang:num_running_reqs", queued="sglang:num_queue_reqs",
                 kv_use="sglang:token_usage", ttft="sglang:time_to_first_token_seconds"),
    MetricSeries("accept", "sglang:spec_accept_length", "gauge", combine="max"),
    MetricSeries("cache_hit", "sglang:cache_hit_rate", "gauge", scale=100.0, combine="max"),
    MetricSeries("prompt_rate", "sglang:prompt_tokens", "rate"),
))


class SGLang:
    name = "sglang"
    ready_line = "The server is fired up and ready to roll!"
    default_port = 30000
    launcher_flags: tuple[str, ...] = (
        "--model-path", "--nnodes", "--node-rank", "--dist-init-addr", "--host", "--port",
        "--tp-size",
        "--model", "--nccl-init-addr", "--tensor-parallel-size",  # SGLang 0.5.23's aliases
    )

    # every field of ServerArgs; no version line (the flag table's version stands)
    args_dump = ArgsDump("server_args=", complete=True)

    process_marks: tuple[str, ...] = ("sglang",)
    # SGLang 0.5.23 only calls faulthandler.enable() (fatal signals): no signal prints its stacks and
    # lets it run on; py-spy in the image is the way (docs/design.md, issue 27)
    stack_signal: str | None = None
    memory_fraction = MemoryFraction(("--mem-fraction-static",), "mem_fraction_static")
    metrics = METRICS

    def rank_flags(self, launch: Launch) -> list[str]:
        return ["--model-path", launch.model, "--nnodes", str(launch.nnodes), "--node-rank",
                str(launch.rank), "--dist-init-addr", f"{launch.head_addr}:{launch.dist_port}",
                "--host", launch.bind_host, "--port", str(launch.port),
                "--tp-size", str(launch.tp_size)]

    def request_line(self, text: str) -> bool:
        return _REQUESTS(text)

    def serves_http(self, rank: int, nnodes: int, distributed_backend: str) -> bool:
        return True

    def serves_metrics(self, rank: int, nnodes: int, distributed_backend: str) -> bool:
        """Rank 0 only: the workers' small health server has no /metrics."""
        return rank == 0

    def probes(self, rank: int) -> tuple[Probe, ...]:
        if rank == 0:
            return (Probe("/health"), Probe("/v1/models", names_model=True))
        return (Probe("/health"),)

    def ready(self, facts: ReadyFacts) -> bool:
        """Rank 0: its ready line (SGLang prints it once every rank joined and the API serves).
        Other ranks: ``/health`` 200 once rank 0's ready line appeared (the health server may
        answer before the group is whole); a rank that answers no HTTP at all (an SGLang build
        without the workers' health server) is ready once it runs and rank 0 is ready; not
        probed yet is not "no HTTP" (a reattach replays rank 0's line before any probe)."""
        if facts.rank == 0:
            return facts.line_seen
        if facts.health == 200:
            return facts.head_line_seen
        return facts.probed and facts.health is None and facts.running and facts.head_ready

    def completion(self, model: str, max_tokens: int) -> Completion:
        return Completion("/generate", {"text": CANARY_PROMPT, "sampling_params": {
            "max_new_tokens": max_tokens, "temperature": 0}})

    def completion_text(self, answer: object) -> str | None:
        text = answer.get("text") if isinstance(answer, dict) else None
        return text if isinstance(text, str) else None
