"""Prometheus's text exposition format (0.0.4), written by hand: the demo has nothing but the
standard library, and the engines it imitates serve theirs through ``prometheus_client``.
Each personality (``sglang``, ``vllm``) names its families; this writes them.
"""

from __future__ import annotations

import math

from .load import HistogramReading

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def number(value: float) -> str:
    """A sample value or a bucket bound as Prometheus's client writes it (``1.0``, ``+Inf``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


class Exposition:
    """Families one after another, each with its ``# HELP`` and ``# TYPE`` lines, every sample
    with the same labels (the served model's name; vLLM's engine index)."""

    def __init__(self, labels: dict[str, str]) -> None:
        self._labels = labels
        self._lines: list[str] = []

    def _sample(self, name: str, value: float, extra: dict[str, str] | None = None) -> None:
        labels = {**self._labels, **(extra or {})}
        inside = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
        self._lines.append(f"{name}{{{inside}}} {number(value)}" if inside else f"{name} {number(value)}")

    def _head(self, name: str, kind: str, help_text: str) -> None:
        self._lines += [f"# HELP {name} {_help(help_text)}", f"# TYPE {name} {kind}"]

    def gauge(self, name: str, help_text: str, value: float) -> None:
        self._head(name, "gauge", help_text)
        self._sample(name, value)

    def counter(self, name: str, help_text: str, value: float) -> None:
        """``name`` ends in ``_total``, as the format wants a counter's sample named."""
        self._head(name, "counter", help_text)
        self._sample(name, value)

    def histogram(self, name: str, help_text: str, hist: HistogramReading) -> None:
        self._head(name, "histogram", help_text)
        for bound, count in zip((*hist.bounds, math.inf), hist.cumulative, strict=True):
            self._sample(f"{name}_bucket", count, {"le": number(bound)})
        self._sample(f"{name}_count", hist.observations)
        self._sample(f"{name}_sum", hist.total)

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
