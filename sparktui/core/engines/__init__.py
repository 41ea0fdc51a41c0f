"""Engine adapters, one module per engine behind ``base.Engine``."""

from __future__ import annotations

from sparktui.core.engines.base import FATAL_LINES, Engine, Launch, Probe, ReadyFacts
from sparktui.core.engines.sglang import SGLang
from sparktui.core.engines.vllm import VLLM

ENGINES: dict[str, Engine] = {"sglang": SGLang(), "vllm": VLLM()}


def engine(name: str) -> Engine:
    """The adapter of a recipe's ``engine`` (validated to be one of ``ENGINES``)."""
    return ENGINES[name]


__all__ = ["ENGINES", "FATAL_LINES", "Engine", "Launch", "Probe", "ReadyFacts", "engine"]
