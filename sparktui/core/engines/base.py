"""What sparktui needs to know about an inference engine, behind one interface.

An adapter says which flags the launcher appends per rank, which ranks answer HTTP and on
which paths, which serve the engine's own metrics and which of those are read, when a rank is
ready, the engine's default ready and fatal lines, and which of its lines are about the
requests it serves (data, not boot evidence). Pure: the Orchestrator, the plan, the health
prober and the metrics scraper ask it; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sparktui.core.engines.dumps import ArgsDump
from sparktui.core.metrics import MetricsSpec

FATAL_LINES: tuple[str, ...] = (
    "Traceback (most recent call last):",
    "Watchdog caught collective operation timeout",
    "NCCL error",
    "torch.OutOfMemoryError: CUDA out of memory",
    "TCPStore ... Failed to recv",
    "EngineDeadError",
)
"""Lines after which a rank will not come up, whatever the engine; checked unless
``[boot] engine_fatal = false``."""

PEER_LOST_LINES: tuple[str, ...] = (
    "Watchdog caught collective operation timeout",
    "TCPStore ... Failed to recv",
)
"""Of those, the lines a rank prints when another rank of its group went away (torch's NCCL
watchdog on the head, the lost TCPStore connection on a worker): it fell because a peer did, so
a peer that ended about then without saying so went first."""


@dataclass(frozen=True)
class Probe:
    """One HTTP request that must answer 200 for the rank to count as healthy."""

    path: str
    names_model: bool = False  # the body must name the served model (``/v1/models``)


@dataclass(frozen=True)
class Completion:
    """A one-shot, unstreamed completion the head is asked for (the liveness canary): a real
    forward pass, through every TP peer, unlike ``/health``."""

    path: str
    body: dict[str, object]


CANARY_PROMPT = "Say OK."


def openai_completion_text(answer: object) -> str | None:
    """The first choice's text of an OpenAI ``/v1/completions`` answer, or None."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    text = first.get("text") if isinstance(first, dict) else None
    return text if isinstance(text, str) else None


@dataclass(frozen=True)
class Launch:
    """What the rank flags are made of (the plan fills it from the recipe and the cluster)."""

    model: str
    nnodes: int
    rank: int
    head_addr: str  # the head's fabric address
    dist_port: int  # rendezvous port on the head
    port: int  # the rank's API port
    tp_size: int = 1  # tensor_parallel_size: the engine's own default is 1, whatever nnodes says
    distributed_backend: str = "mp"
    bind_host: str = "0.0.0.0"  # the API's listen address: every interface, or 127.0.0.1 on the local cluster


@dataclass(frozen=True)
class MemoryFraction:
    """The flag that gives the share of each GPU's memory the engine takes at start (weights,
    then its KV cache up to that share): what the fit check applies to a node's memory. Its
    default, when the args leave it out, is the flag table's (``dest``): vLLM's parser has one,
    SGLang's is None (it picks a share itself at start, from the GPU's size and the TP)."""

    flags: tuple[str, ...]  # every spelling, the first as messages name it
    dest: str  # the field it sets in the engine's flag table


@dataclass(frozen=True)
class ReadyFacts:
    """What is known of one rank when its readiness is decided."""

    rank: int
    running: bool  # its container (or process) runs
    health: int | None  # the last probe's code; None: nothing answered or not probed
    line_seen: bool  # its own ready line appeared (where one is expected)
    head_ready: bool  # rank 0 is ready
    head_line_seen: bool  # rank 0's ready line appeared
    probed: bool = False  # a probe was sent since it started booting: health None = nothing answers


class Engine(Protocol):
    """One engine's rules. The plan asks for the rank flags and who serves HTTP, the recipe for
    the launcher's flags and defaults, the health prober for the probes, the board for ready."""

    name: str
    ready_line: str  # the default ready line, printed by rank 0
    default_port: int
    launcher_flags: tuple[str, ...]  # flags the launcher owns; a recipe setting one is an error
    args_dump: ArgsDump  # the line where it prints the arguments it runs with
    process_marks: tuple[str, ...]  # words of its processes' command lines (``core.procs``)
    stack_signal: str | None  # a signal that makes it print every thread's stack and go on
    memory_fraction: MemoryFraction  # the flag giving its share of the GPU's memory (fit check)
    metrics: MetricsSpec  # its Prometheus page and the series of it the console shows

    def rank_flags(self, launch: Launch) -> list[str]:
        """The flags appended to the recipe's ``args`` for this rank."""
        ...

    def request_line(self, text: str) -> bool:
        """Whether ``text`` is one of the engine's lines about a request it served (its access
        log, its request log): the client's text, kept and shown but never boot evidence
        (``core/engines/requestlog``)."""
        ...

    def serves_http(self, rank: int, nnodes: int, distributed_backend: str) -> bool:
        """Whether the rank answers HTTP on its port (headless workers do not)."""
        ...

    def serves_metrics(self, rank: int, nnodes: int, distributed_backend: str) -> bool:
        """Whether the rank serves ``metrics.path`` (when the engine's ``metrics.flag``, if any,
        is given): the metrics scraper asks only those."""
        ...

    def probes(self, rank: int) -> tuple[Probe, ...]:
        """What to ask a rank that serves HTTP; all must answer 200."""
        ...

    def ready(self, facts: ReadyFacts) -> bool:
        """The engine's ready rule for one booting rank."""
        ...

    def completion(self, model: str, max_tokens: int) -> Completion:
        """The request for ``max_tokens`` tokens of ``CANARY_PROMPT`` (the engine's own
        path: SGLang's native ``/generate``, vLLM's ``/v1/completions``)."""
        ...

    def completion_text(self, answer: object) -> str | None:
        """The generated text in a 200 answer to ``completion``; None when the answer is not
        one (an engine that answered something else)."""
        ...
