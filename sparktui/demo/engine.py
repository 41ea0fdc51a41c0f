"""sparktui demo engine: a fake SGLang or vLLM rank (not a real model) for testing a launcher for real.

Run one process (or container) per rank, exactly as a launcher runs ``sglang.launch_server``::

    python3 -m sparktui.demo.engine --model-path M --nnodes N --node-rank R \\
        --dist-init-addr HOST:PORT --host H --port P [any other SGLang flag ...]

or ``vllm serve`` with vLLM's multi-node flags (``--headless`` on every rank but 0)::

    python3 -m sparktui.demo.engine --model M --host H --port P --nnodes N --node-rank R \\
        --master-addr HOST --master-port PORT [--headless] [any other vLLM flag ...]

The flags decide which engine it imitates (a vLLM-only flag: vLLM; else SGLang); ``--demo-engine``
or ``SPARKTUI_DEMO_ENGINE`` forces one.

It needs nothing but CPython 3.10+ and its standard library: this package (``sparktui/demo/``,
its modules and ``fields.json``) is copied alone into a minimal image (busybox + CPython, see
``sparktui_testbed/image.py``) and run as ``python3 -m sparktui.demo.engine`` or
``python3 sparktui/demo/engine.py``. The modules: ``config`` (flags and environment),
``sglang`` and ``vllm`` (each engine's personality: boot log, dump, prefix), ``lines`` (the
ready and fatal lines sparktui reads), ``rank``, ``life`` (how it exits), ``rendezvous``,
``http``, ``chat``, ``load`` (the requests running and queued, the token counters and latency
histograms), ``metrics`` (Prometheus's text format), ``traffic`` (ticks, flood), ``fields`` (the
flag tables), ``log``.

What it does, like an SGLang rank:

* Every log line goes to stdout, flushed per write, prefixed ``[YYYY-mm-dd HH:MM:SS TP<rank>] ``.
* Rendezvous over real TCP at ``--dist-init-addr``: rank 0 listens on PORT (all interfaces), the
  workers connect (retrying every 0.2 s until the rendezvous timeout) and send their rank; when all
  are in, rank 0 answers "go". The connections stay open: when any rank dies, the others notice
  and exit with code 4, as a TP group falling apart does.
* A boot sequence (banner, server args, torch distributed init, weight shards, KV cache, cuda
  graphs) spread over ``--demo-boot-seconds``, with the lines a recipe's boot checks look for.
* HTTP on ``--host``/``--port``: ``GET /health`` on every rank (503 while booting, 200 when
  ready); on rank 0 also ``GET /v1/models``, ``GET /get_model_info``,
  ``POST /v1/chat/completions`` (OpenAI format, streaming or not), ``POST /v1/completions`` and
  SGLang's native ``POST /generate`` with canned demo text. Every completion is a step of the
  whole group first (rank 0 asks every worker over the rendezvous connection): a worker stopped
  by SIGSTOP makes the head's completions hang while its ``/health`` answers 200, as SGLang's.
* At most ``--max-running-requests`` (default 4) requests decode at once; the others queue.
* With ``--enable-metrics``, rank 0's ``GET /metrics`` in Prometheus's text format with SGLang's
  families (``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:gen_throughput``,
  ``sglang:token_usage``, ``sglang:cache_hit_rate``, the token counters, the time-to-first-token
  and end-to-end histograms; ``sglang:spec_accept_length`` with ``--speculative-algorithm``),
  counted from the requests it serves since it started; 404 without the flag, as SGLang's.

What changes as vLLM:

* Lines are prefixed ``(Worker_TP<rank> pid=<pid>) INFO mm-dd HH:MM:SS [demo] ``; the boot log is
  vLLM's (engine config, world size, weights, KV cache, graph capture); rank 0 waits for every
  worker, then starts its API server and prints ``Application startup complete.``
* Rendezvous at ``--master-addr``/``--master-port`` (defaults 127.0.0.1 and 29501, as vLLM's).
* Rank 0 binds its port at start but serves only from ``Application startup complete.`` on (as
  vLLM's API server does): ``/health``, ``/v1/models``, ``/v1/chat/completions``,
  ``/v1/completions`` (no ``/generate``) and ``/metrics`` (always on, vLLM's families:
  ``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``,
  the token and preemption counters, the first-token and per-token histograms); at most
  ``--max-num-seqs`` (default 4) requests run at once. ``--headless``
  workers open no port at all, and ranks > 0 must be ``--headless`` (exit 2 otherwise).
* SIGTERM/SIGINT: logs ``Received sigterm, shutting down`` (``sigint``) and exits 0 at once.

Every engine flag it does not know is accepted and ignored (``--flag`` or ``--flag value``);
``--served-model-name`` is honoured (default: the model path).

Demo switches (a flag wins over its environment variable; the variables let a recipe's
``[env]`` table set them):

* ``--demo-boot-seconds S`` / ``SPARKTUI_DEMO_BOOT_SECONDS``: simulated load time (default 2.0, 0 ok).
* ``--demo-fail-rank R`` / ``SPARKTUI_DEMO_FAIL_RANK``: rank R prints an NCCL traceback
  (``RuntimeError: NCCL error ...``) half way through loading weights and exits with code 3.
* ``--demo-fail-after S`` / ``SPARKTUI_DEMO_FAIL_AFTER``: the failing rank crashes S seconds after
  it became ready instead (rank 0 when ``--demo-fail-rank`` is not given).
* ``--demo-stall`` / ``SPARKTUI_DEMO_STALL=1``: never becomes ready; logs a waiting line every 2 s.
* ``--demo-hang-rank R`` / ``SPARKTUI_DEMO_HANG_RANK``: once the group formed every rank prints an
  ``NCCL INFO ... Init COMPLETE`` line; rank R then prints nothing more (a rank stuck in its first
  collective) until it is stopped, while the others go on loading.
* ``--demo-alloc SIZE`` / ``SPARKTUI_DEMO_ALLOC`` (with ``--demo-alloc-step SIZE``, default 64M,
  ``--demo-alloc-every S``, default 0.5, ``--demo-alloc-rank R``, default every rank,
  ``--demo-alloc-once FILE``: only where FILE is absent, made first, so a restart does not repeat
  it): from weight loading on, take SIZE of memory one step at a time (each page written) and
  hold it until exit, a line per step: what the memory guard, an out-of-memory kill and a
  restart's wait are shown on.
* ``--demo-flood LPS`` / ``SPARKTUI_DEMO_FLOOD``: after ready, LPS realistic log lines per second.
* ``--demo-tick S`` / ``SPARKTUI_DEMO_TICK``: after ready, ``demo tick <n>`` every S seconds,
  n = 1, 2, 3, ...
* ``--demo-rendezvous-timeout S`` / ``SPARKTUI_DEMO_RENDEZVOUS_TIMEOUT``: how long rank 0 waits for
  the workers and a worker tries to reach rank 0 (default 120).
* ``--demo-engine sglang|vllm`` / ``SPARKTUI_DEMO_ENGINE``: the engine to imitate (default: from
  the flags).
* ``SPARKTUI_DEMO_CLAMP="field=value[@rank],..."``: the dump of the arguments prints the field with
  that value (on that rank only), as an engine that clamps a flag (``max_running_requests=13@2``);
  ``SPARKTUI_DEMO_DROP="field[@rank],..."`` leaves the field out, as one that never heard of it.

The dump is built from ``fields.json`` in this package (the shipped SGLang and vLLM flag tables:
every field with its default, the command line's flags applied); without it, a short one.

Exit codes:

* 0: stopped by SIGTERM or SIGINT.
* 1: internal error of the demo engine (a bug; the traceback is logged).
* 2: bad arguments or environment values, a port that cannot be bound, the rendezvous timed out
  or the head refused this rank.
* 3: simulated failure (``--demo-fail-rank`` / ``--demo-fail-after``).
* 4: the TP group fell apart: another rank died or left after the group formed.

Rendezvous protocol (text lines over the TCP connection): worker ``hello <rank> <nnodes>``; head
``go <peers>`` or ``error <reason>``; worker ``ready`` when booted; head ``step <n>`` before each
completion, worker ``done <n>`` (the head waits for every worker's); either side ``bye`` when it
shuts down on a signal (the peer then waits 1 s for its own signal before falling apart, so that
stopping every rank at once exits 0 everywhere).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from collections.abc import Sequence

if not __package__:  # run as a file: import the package it is in, from the folder holding sparktui/
    _HERE = os.path.dirname(os.path.abspath(__file__))
    # the script's own folder would put this package's http.py in front of the standard library's
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))
    __package__ = "sparktui.demo"

from . import sglang, vllm
from .config import parse_config
from .rank import Personality, Rank

PERSONALITIES: dict[str, Personality] = {"sglang": sglang.PERSONALITY, "vllm": vllm.PERSONALITY}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and run one demo rank; returns only for --help (argparse exits).
    SIGUSR1 prints every thread's stack on stderr and the rank runs on: the stack signal
    ``sparktui dump`` uses where the image has no py-spy (``core.procs.DEMO_STACK_SIGNAL``)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    cfg = parse_config(argv)
    return Rank(cfg, PERSONALITIES[cfg.engine]).run()


if __name__ == "__main__":
    sys.exit(main())
