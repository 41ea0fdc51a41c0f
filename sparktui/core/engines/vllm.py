"""vLLM with ``distributed_backend = "mp"``: rank 0 serves the API; on more than one node the
ranks > 0 run ``--headless`` and open no port, so they are ready when they run and rank 0 is
ready (a fatal line or an exit fails the rank before this rule is asked). ``ray`` is refused by
the recipe until it is supported."""

from __future__ import annotations

from sparktui.core.engines.base import (
    CANARY_PROMPT,
    Completion,
    Launch,
    MemoryFraction,
    Probe,
    ReadyFacts,
    openai_completion_text,
)
from sparktui.core.engines.dumps import ArgsDump
from sparktui.core.engines.requestlog import UVICORN_ACCESS, RequestLines
from sparktui.core.metrics import MetricSeries, MetricsSpec, load_series

# vLLM prefixes each process's output with "(<name> pid=<pid>) " (APIServer, EngineCore_DP0,
# Worker_TP0, ...); its own loggers then print "<LEVEL> <mm-dd hh:mm:ss> [<file>:<line>] ".
_PREFIX = r"\([^()]* pid=\d+\) "
_LOGGER = r"(?:DEBUG|INFO) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]\s]+:\d+\] "
_REQUESTS = RequestLines(_PREFIX, (
    UVICORN_ACCESS,
    # --enable-log-requests (RequestLogger, AsyncLLM): the prompt, the params, the payload, the
    # output, and the request id, which a client may choose (X-Request-Id).
    _LOGGER + r"(?:Received (?:[\w-]+ )?request |Request .+ details: |Generated response "
              r"|Added request |Aborted request)",
))

# vLLM's /metrics (always served by the API server; prometheus_client), labelled model_name and
# engine (the data-parallel engine's index). It has no tokens/s gauge: the generation counter's
# rate is the throughput.
METRICS = MetricsSpec(series=(
    *load_series(throughput=MetricSeries("throughput", "vllm:generation_tokens", "rate"),
                 running="vllm:num_requests_running", queued="vllm:num_requests_waiting",
                 kv_use="vllm:kv_cache_usage_perc", ttft="vllm:time_to_first_token_seconds"),
    MetricSeries("prompt_rate", "vllm:prompt_tokens", "rate"),
    MetricSeries("preemptions", "vllm:num_preemptions", "rate"),
))


def _headless(rank: int, nnodes: int, distributed_backend: str) -> bool:
    return distributed_backend == "mp" and nnodes > 1 and rank > 0


class VLLM:
    name = "vllm"
    ready_line = "Application startup complete."
    default_port = 8000
    launcher_flags: tuple[str, ...] = (
        "--model", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless",
        "--host", "--port", "--tensor-parallel-size",
        "-n", "-r", "-tp",  # vLLM 0.33.0's aliases
    )

    # log_non_default_args (entrypoints/common/startup.py): what differs from the defaults, by
    # the API server's setup only (a --headless worker prints none); the version from
    # "vLLM server version 0.33.0, serving model M" (older builds: "vLLM API server version")
    args_dump = ArgsDump("non-default args: ", complete=False,
                         version_pattern=r"vLLM (?:API )?server version ([\w.+-]+)",
                         every_rank=False)

    process_marks: tuple[str, ...] = ("vllm",)
    # vLLM 0.33.0 only calls faulthandler.enable() (fatal signals): no signal prints its stacks and
    # lets it run on; py-spy in the image is the way (docs/design.md, issue 27)
    stack_signal: str | None = None
    # --gpu_memory_utilization too: vLLM's parser reads "_" as "-" in a flag's name
    memory_fraction = MemoryFraction(("--gpu-memory-utilization", "--device-memory-utilization"),
                                     "gpu_memory_utilization")
    metrics = METRICS

    def rank_flags(self, launch: Launch) -> list[str]:
        flags = ["--model", launch.model, "--host", launch.bind_host, "--port", str(launch.port),
                 "--tensor-parallel-size", str(launch.tp_size)]
        if launch.distributed_backend == "mp" and launch.nnodes > 1:
            flags += ["--nnodes", str(launch.nnodes), "--node-rank", str(launch.rank),
                      "--master-addr", launch.head_addr, "--master-port", str(launch.dist_port)]
            if _headless(launch.rank, launch.nnodes, launch.distributed_backend):
                flags.append("--headless")
        return flags

    def request_line(self, text: str) -> bool:
        return _REQUESTS(text)

    def serves_http(self, rank: int, nnodes: int, distributed_backend: str) -> bool:
        return not _headless(rank, nnodes, distributed_backend)

    def serves_metrics(self, rank: int, nnodes: int, distributed_backend: str) -> bool:
        """The ranks that serve HTTP: a headless worker opens no port."""
        return self.serves_http(rank, nnodes, distributed_backend)

    def probes(self, rank: int) -> tuple[Probe, ...]:
        if rank == 0:
            return (Probe("/health"), Probe("/v1/models", names_model=True))
        return ()  # a headless worker: nothing to ask

    def ready(self, facts: ReadyFacts) -> bool:
        """Rank 0: its ready line, unless its API answers but is unhealthy (``/health`` or
        ``/v1/models`` not naming the model). Headless workers: running while rank 0 is ready."""
        if facts.rank == 0:
            return facts.line_seen and facts.health in (200, None)
        return facts.running and facts.head_ready

    def completion(self, model: str, max_tokens: int) -> Completion:
        return Completion("/v1/completions", {"model": model, "prompt": CANARY_PROMPT,
                                              "max_tokens": max_tokens, "temperature": 0})

    def completion_text(self, answer: object) -> str | None:
        return openai_completion_text(answer)
