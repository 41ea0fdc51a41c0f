"""Engine adapters, one module per engine behind ``base.Engine``."""

from __future__ import annotations

from sparktui.core.engines.base import FATAL_LINES, PEER_LOST_LINES, Engine, Launch, Probe, ReadyFacts
from sparktui.core.engines.requestlog import PROBE_HINT, PROBE_REQUESTS
from sparktui.core.engines.sglang import SGLang
from sparktui.core.engines.vllm import VLLM

ENGINES: dict[str, Engine] = {"sglang": SGLang(), "vllm": VLLM()}


def engine(name: str) -> Engine:
    """The adapter of a recipe's ``engine`` (validated to be one of ``ENGINES``)."""
    return ENGINES[name]


def is_probe_line(text: str) -> bool:
    """An access-log line of one of sparktui's health probes, whatever the engine (the console
    hides them): ``INFO:     127.0.0.1:54321 - "GET /health HTTP/1.1" 200 OK`` after the
    engine's prefix. Most lines fail the first, cheap test."""
    return (PROBE_HINT in text and any(r in text for r in PROBE_REQUESTS)
            and any(e.request_line(text) for e in ENGINES.values()))


__all__ = ["ENGINES", "FATAL_LINES", "PEER_LOST_LINES", "PROBE_HINT", "Engine", "Launch", "Probe",
           "ReadyFacts", "engine", "is_probe_line"]
