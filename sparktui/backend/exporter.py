"""sparktui's own state for Prometheus (``sparktui watch RECIPE --metrics HOST:PORT``).

Served by the Prometheus client library (its text exposition and HTTP server), on loopback unless
the operator names another address. What is served: every rank's state (one series per state,
1 for the rank's), restarts, health code, silence and checks; the canary; and the engine series
scraped from each rank (``backend.metrics``), relabelled by rank and node: the engine's gauges
and counters as the engine named them, its histograms as the pulse's p50/p95.

The server answers in its own thread; it reads a snapshot the event loop rebuilds (``refresh``),
never the Orchestrator's live objects.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from sparktui.core.rankstate import STATES

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from sparktui.backend.orchestrator import Orchestrator

RANK_LABELS = ["recipe", "rank", "node"]
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def listen_address(text: str) -> tuple[str, int]:
    """``PORT`` (on 127.0.0.1), ``HOST:PORT`` or ``[V6]:PORT``; ValueError with a sentence."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--metrics {text!r}: give PORT or HOST:PORT (a port 1-65535)")
    return host, int(port)


class StateCollector(Collector):
    """The families of one snapshot (``refresh``), built on the event loop."""

    def __init__(self, orch: Orchestrator | None) -> None:
        """``orch``: the recipe served (the console changes it as recipes are opened; None:
        nothing is served)."""
        self.orch = orch
        self._families: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        yield from list(self._families)

    def refresh(self) -> None:
        """A new snapshot of the Orchestrator's state (run on its event loop)."""
        orch = self.orch
        if orch is None:
            self._families = []
            return
        slug = orch.recipe.slug
        now = time.time()
        state = GaugeMetricFamily("sparktui_rank_state", "1 for the rank's current state",
                                  labels=[*RANK_LABELS, "state"])
        restarts = CounterMetricFamily("sparktui_rank_restarts", "Restarts of the rank",
                                       labels=RANK_LABELS)
        health = GaugeMetricFamily("sparktui_rank_health_code",
                                   "The last health probe's HTTP code (absent: no answer)",
                                   labels=RANK_LABELS)
        silent = GaugeMetricFamily("sparktui_rank_silent_seconds",
                                   "Seconds since the rank's last line", labels=RANK_LABELS)
        checks = GaugeMetricFamily("sparktui_rank_checks", "The rank's boot checks by verdict",
                                   labels=[*RANK_LABELS, "verdict"])
        families: list[Metric] = [state, restarts, health, silent, checks]
        for info in orch.ranks:
            labels = [slug, str(info.rank), info.node.name]
            for s in STATES:
                state.add_metric([*labels, s], 1.0 if info.state == s else 0.0)
            restarts.add_metric(labels, float(info.restarts))
            if info.health is not None:
                health.add_metric(labels, float(info.health))
            quiet = info.silent_s(now)
            if quiet is not None:
                silent.add_metric(labels, quiet)
            for verdict, n in orch.checks.rank_summary(info.rank).items():
                checks.add_metric([*labels, verdict], float(n))
        canary = orch.canary_state() if orch.plan.liveness is not None else None
        if canary is not None:
            wedged = GaugeMetricFamily("sparktui_group_wedged", "1 when the canary marked the "
                                       "group wedged", labels=["recipe"])
            wedged.add_metric([slug], 1.0 if canary.wedged else 0.0)
            families.append(wedged)
            if canary.last is not None and canary.last.ok and canary.last.latency_ms is not None:
                latency = GaugeMetricFamily("sparktui_canary_latency_seconds",
                                            "The last canary completion's latency",
                                            labels=["recipe"])
                latency.add_metric([slug], canary.last.latency_ms / 1000)
                families.append(latency)
        families += self._engine_families(orch, slug)
        self._families = families

    def _engine_families(self, orch: Orchestrator, slug: str) -> list[Metric]:
        """The engine's series of each rank's last good scrape, relabelled by rank and node."""
        scraper = orch.metrics
        out: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        stale = GaugeMetricFamily("sparktui_engine_metrics_stale",
                                  "1 when the rank's last scrape failed (values are the last good)",
                                  labels=RANK_LABELS)
        kinds = {s.family: s.read for s in scraper.spec.series}
        for rank, pulse in sorted(scraper.pulses.items()):
            node = orch.ranks[rank].node.name
            labels = [slug, str(rank), node]
            stale.add_metric(labels, 0.0 if pulse.stale is None else 1.0)
            scrape = scraper.last.get(rank)
            if scrape is not None:
                for family, value in sorted(scrape.values.items()):
                    if math.isnan(value):
                        continue
                    if kinds.get(family) == "rate":
                        metric = out.setdefault(family, CounterMetricFamily(
                            family, f"{family} as the engine counts it", labels=RANK_LABELS))
                    else:
                        metric = out.setdefault(family, GaugeMetricFamily(
                            family, f"{family} as the engine reports it", labels=RANK_LABELS))
                    metric.add_metric(labels, value)
            for key, quantile in pulse.values().items():
                if quantile is None or key not in ("ttft_p50", "ttft_p95"):
                    continue
                name = f"sparktui_engine_{key}_seconds"
                metric = out.setdefault(name, GaugeMetricFamily(
                    name, f"Time to first token, {key[-3:]} over the last minute", labels=RANK_LABELS))
                metric.add_metric(labels, quantile)
        return [stale, *out.values()]


def serve(collector: StateCollector, host: str, port: int) -> WSGIServer:
    """The exposition on ``host:port`` in a thread of its own; the server, to shut down."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
