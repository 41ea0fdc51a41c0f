"""CPU cost of scraping the engines' metrics: 8 ranks every 5 s.

The scraper as the Orchestrator runs it (``Orchestrator.metrics``, ``backend/metrics.py``) on an
8-rank plan of the local cluster, every rank taken as one that serves metrics, each answering a
vLLM-sized page (``body``: the families sparktui reads and the usual others a real page has,
Python's and the process's, histograms with all their buckets; about 60 KB). The pages are
served by a child process (the engines' side, not counted): measured is this process's CPU time
with the scraper running, against a baseline of the same process and event loop without it
(the same run, just before). Budget: 1 % of one core.

    python bench/metrics.py [--seconds 60] [--interval 5]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import resource
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.backend.orchestrator import Orchestrator  # noqa: E402
from sparktui.core.cluster import local_cluster  # noqa: E402
from sparktui.core.plan import build_plan  # noqa: E402
from sparktui.core.recipe import load_recipe  # noqa: E402

BUDGET = 1.0  # % of one core
RANKS = 8


def body(scrape: int) -> bytes:
    """A vLLM-like page whose counters grow with ``scrape``."""
    m = 'model_name="demo",engine="0"'
    lines: list[str] = []

    def family(name: str, kind: str, samples: list[str]) -> None:
        lines.extend([f"# HELP {name} {name.replace('_', ' ')}", f"# TYPE {name} {kind}", *samples])

    for gen in range(3):  # what every Python process serves
        family(f"python_gc_objects_collected_gen{gen}", "counter",
               [f'python_gc_objects_collected_total{{generation="{gen}"}} {1000 * gen + scrape}'])
    for name in ("process_virtual_memory_bytes", "process_resident_memory_bytes",
                 "process_start_time_seconds", "process_cpu_seconds_total", "process_open_fds"):
        family(name, "gauge", [f"{name} {1e9 + scrape}"])
    family("vllm:num_requests_running", "gauge", [f"vllm:num_requests_running{{{m}}} {scrape % 7}"])
    family("vllm:num_requests_waiting", "gauge", [f"vllm:num_requests_waiting{{{m}}} {scrape % 3}"])
    family("vllm:kv_cache_usage_perc", "gauge", [f"vllm:kv_cache_usage_perc{{{m}}} 0.{scrape % 9}"])
    for name in ("prompt_tokens", "generation_tokens", "num_preemptions", "request_success"):
        family(f"vllm:{name}", "counter", [f"vllm:{name}_total{{{m}}} {scrape * 1234.0}"])
    les = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75",
           "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0"]
    for name in ("time_to_first_token_seconds", "time_per_output_token_seconds",
                 "e2e_request_latency_seconds", "request_queue_time_seconds",
                 "request_inference_time_seconds", "request_prefill_time_seconds",
                 "request_decode_time_seconds", "request_prompt_tokens", "request_generation_tokens",
                 "iteration_tokens_total"):
        full = f"vllm:{name}"
        samples = [f'{full}_bucket{{{m},le="{le}"}} {scrape * (i + 1)}.0' for i, le in enumerate(les)]
        samples += [f'{full}_bucket{{{m},le="+Inf"}} {scrape * (len(les) + 1)}.0',
                    f"{full}_count{{{m}}} {scrape * (len(les) + 1)}.0", f"{full}_sum{{{m}}} {scrape * 3.5}"]
        family(full, "histogram", samples)
    return ("\n".join(lines) + "\n").encode()


def serve(ports: list[int]) -> None:
    """The 8 ranks' pages, each scrape a new one (counters that grow)."""
    count = [0]

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            count[0] += 1
            data = body(count[0])
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    import threading
    servers = [ThreadingHTTPServer(("127.0.0.1", p), Page) for p in ports]
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    servers[0].serve_forever()


def own_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


async def measure(seconds: float, interval: float) -> None:
    recipe = load_recipe(ROOT / "recipes" / "demo-vllm-tp4" / "recipe.toml")
    cluster = local_cluster(RANKS)
    spec = recipe.spec.model_copy(update={"required_nodes": RANKS, "tensor_parallel_size": RANKS})
    recipe8 = type(recipe)(spec=spec, source=recipe.source, slug=recipe.slug)
    plan = build_plan(recipe8, cluster)
    ports = [r.port for r in plan.ranks]
    pages = multiprocessing.get_context("spawn").Process(target=serve, args=(ports,), daemon=True)
    pages.start()
    with tempfile.TemporaryDirectory() as tmp:
        orch = Orchestrator(recipe8, cluster, plan, state_root=Path(tmp))
        await orch.connect()
        scraper = orch.metrics
        scraper.interval = interval
        scraper.ranks = [r.rank for r in plan.ranks]  # every rank serves a page here
        for info in orch.ranks:
            info.move("creating")
            info.move("booting")
            info.move("ready")
        await asyncio.sleep(1.5)  # the pages listen
        c0, t0 = own_cpu(), time.monotonic()
        await asyncio.sleep(seconds)  # the baseline: this process, its loop, no scraper
        base, base_span = own_cpu() - c0, time.monotonic() - t0
        task = asyncio.create_task(scraper.loop())
        await asyncio.sleep(interval + 0.5)  # a first round done: pulses made
        rounds0 = [len(p.history("running")) for p in scraper.pulses.values()]
        c0, t0 = own_cpu(), time.monotonic()
        await asyncio.sleep(seconds)
        c1, t1 = own_cpu(), time.monotonic()
        scraped = sum(len(p.history("running")) for p in scraper.pulses.values()) - sum(rounds0)
        stale = [r for r, p in scraper.pulses.items() if p.stale is not None]
        scraper.closed = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await orch.close()
    pages.terminate()
    assert len(scraper.pulses) == RANKS and not stale, (len(scraper.pulses), stale)
    span = t1 - t0
    own = (c1 - c0) - base * span / base_span
    size = len(body(1)) / 1024
    print(f"engine metrics, {RANKS} ranks every {interval:g} s, pages of {size:.0f} KB, "
          f"{span:.0f} s window: {scraped} scrapes ({scraped / span:.2f}/s)")
    print(f"  sparktui process: {100 * (c1 - c0) / span:.2f} % of one core, baseline "
          f"{100 * base / base_span:.2f} %: the scraper {100 * own / span:.2f} % "
          f"({1000 * own / max(1, scraped):.2f} ms per scrape)")
    print(f"  budget {BUDGET:g} %: ratio {100 * own / span / BUDGET:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--interval", type=float, default=5.0)
    args = ap.parse_args()
    asyncio.run(measure(args.seconds, args.interval))


if __name__ == "__main__":
    main()
