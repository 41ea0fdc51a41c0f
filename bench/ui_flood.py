"""Keypress-to-screen latency and memory of the console under a log flood.

The real console (``SparkApp``), headless through ``App.run_test()``, on the built-in LOCAL
cluster with a variant of ``recipes/demo-tp4`` (in a temporary recipes folder): boot in 0 s
(``--demo-boot-seconds 0``), ``SPARKTUI_DEMO_FLOOD = "2000"`` and ``--ranks`` ranks (4 by
default; the local cluster gets a node per rank), so each demo rank writes 2,000 lines per second
once ready. XDG_STATE_HOME and XDG_CONFIG_HOME point into a
temporary folder. The script presses ``u``, waits until every rank is ready, types a grep
(``/``, a regex that keeps about a third of the flood, enter), then for ``--seconds`` presses a
key about 5 times a second (``w``, toggle wrap, by default: the whole log view is laid out and
painted again) and measures each press from the moment the key event is handed to the app (the
driver's ``send_message``, as ``Pilot.press`` and a real terminal's input thread do) until the
first frame the compositor produces after the key's action has run. Headless, Textual skips
turning a frame into terminal output; the probe does it (``render_segments``) so that cost is
counted too. ``Pilot.press`` itself is not used for the timed presses: it waits for the process
to go idle (up to 1 s, twice), which under a flood never happens, so it would allow only about
one press every 2 s.

The app runs as ``sparktui`` runs it: ``sparktui.ui.gcpolicy.settle()`` before it starts
(``--default-gc`` leaves CPython's collector settings alone, to compare).

Also sampled: the RSS of this process (VmRSS of /proc/self/status) once a second; the demo
ranks and their supervisors are separate processes and are NOT counted. Lines received per
second by the app (from its log store), lines still unread at the end, frames per second and
this process's CPU time. Every line received: after the measurement the rank processes are
stopped (SIGSTOP), and the console must then hold every line each rank wrote (its store, by line
number, with no gap) and count every written line the grep matches. ``down`` always runs at the
end (also after an error or ^C), then the script checks that no process it started is left.

Targets: p95 latency < 50 ms; RSS flat after the first 10 s (grows < 5 % from 10 s, or
``--flat-from``, to the end);
every line received. Exit status 1 when a target is missed (or a rank was not ready at the end:
not a valid run).

    python bench/ui_flood.py [--ranks 4] [--seconds 60] [--flood 2000] [--keys w] [--size 160x50]
                             [--grid] [--pulse] [--flat-from 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.demo_run import (  # noqa: E402
    demo_recipe,
    kill_leftovers,
    leftover_pids,
    pct,
    port_free,
    send_key,
    world_edits,
)

SLUG = "demo-tp4-flood"
WORLD = 4
GREP = "#running-req: 1[0-5],"  # running 10-15 of 1-16: about 3 lines in 8 of the flood
P95_TARGET_MS = 50.0
FLAT_TARGET = 0.05  # RSS growth from --flat-from (10 s) to the end, as a fraction
DIST_INIT_PORT = 25000  # the local cluster's --dist-init-addr port


# -- setup -------------------------------------------------------------------------------------
def flood_recipe(folder: Path, flood: int, port: int, world: int = WORLD,
                 secrets: bool = False) -> Path:
    """``recipes/demo-tp4`` with a 0 s boot, the flood switched on, its own ports and
    ``world`` ranks (the local cluster gets as many nodes as the recipe needs); with
    ``secrets`` an API key and an HF token, which every line is then searched for (the shim
    and the follower mask them)."""
    edits = [
        ('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"'),
        ("\nport = 30000\n", f"\nport = {port}\n"),
        ('\n[env]\n', f'\n[env]\nSPARKTUI_DEMO_FLOOD = "{flood}"\n'),
        *world_edits(world),
    ]
    if secrets:
        edits += [('"--demo-boot-seconds", "0"', '"--demo-boot-seconds", "0", "--api-key", '
                                                 '"sk-bench-secret-0001"'),
                  ('\n[env]\n', '\n[env]\nHF_TOKEN = "hf_bench_token_0002"\n')]
    return demo_recipe(folder, SLUG, edits, "ui_flood")


def down(recipes: Path) -> str:
    """``sparktui down`` on the temporary state (the environment carries the XDG folders)."""
    done = subprocess.run([sys.executable, "-m", "sparktui", "down", "--recipes", str(recipes), SLUG],
                          cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=120)
    return (done.stdout + done.stderr).strip() if done.returncode else ""


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU time of each of ``pids`` that is alive."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / tick
    return out


# -- probes ------------------------------------------------------------------------------------
class RssSampler(threading.Thread):
    """VmRSS of this process once a second (a thread: it keeps time while the loop is busy)."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="rss")
        self.samples: list[tuple[float, int]] = []  # (perf_counter, KiB)
        self.halt = threading.Event()

    @staticmethod
    def rss_kib(field_name: str = "VmRSS") -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
        return 0

    def run(self) -> None:
        while not self.halt.is_set():
            self.samples.append((time.perf_counter(), self.rss_kib()))
            self.halt.wait(1.0)

    def at(self, t: float) -> int:
        """The sample taken closest to ``t``."""
        return min(self.samples, key=lambda s: abs(s[0] - t))[1]


class FrameProbe:
    """Hooks ``App._display`` (every frame the compositor makes) and ``App.run_action`` (every
    key binding): a press is on screen with the first frame made after its action ran."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.frames = 0
        self.action_done = False
        self.action_at = 0.0  # when the last key binding's action returned
        self.waiter: asyncio.Future[float] | None = None
        display, run_action = app._display, app.run_action

        def probe_display(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            if renderable is None:
                return
            if app.is_headless and hasattr(renderable, "render_segments"):
                renderable.render_segments(app.console)  # what a terminal would be sent
            self.frames += 1
            if self.waiter is not None and self.action_done and not self.waiter.done():
                self.waiter.set_result(time.perf_counter())

        async def probe_run_action(*args: Any, **kwargs: Any) -> bool:
            handled = await run_action(*args, **kwargs)
            self.action_at = time.perf_counter()
            self.action_done = True
            return bool(handled)

        app._display = probe_display
        app.run_action = probe_run_action

    def arm(self) -> asyncio.Future[float]:
        self.action_done = False
        self.waiter = asyncio.get_running_loop().create_future()
        return self.waiter


class GcWatch:
    """Pauses of the garbage collector's full (generation 2) collections."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float]] = []  # (perf_counter at the end, seconds)
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        now = time.perf_counter()
        if phase == "start":
            self._start = now
        else:
            self.pauses.append((now, now - self._start))

    def between(self, start: float, end: float) -> list[float]:
        return [d for t, d in self.pauses if start <= t <= end]


def run_queue_wait() -> float:
    """Seconds this thread (the event loop's) has spent runnable but waiting for a CPU
    (``/proc/thread-self/schedstat``, second field): on a shared machine, the part of a press's
    latency that other processes took, not the console."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


async def until(what: Callable[[], bool], timeout: float, why: str) -> None:
    end = time.monotonic() + timeout
    while not what():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {why}")
        await asyncio.sleep(0.05)


# -- the run -----------------------------------------------------------------------------------
@dataclass
class Result:
    seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=dict)  # key -> seconds
    to_action: list[float] = field(default_factory=list)  # key sent -> its action returned
    # per press, in order: (latency, how long the loop's thread was runnable but not running,
    # the CPU time the loop's thread used meanwhile)
    cpu_wait: list[tuple[float, float, float]] = field(default_factory=list)
    timeouts: int = 0
    wrong: int = 0  # presses whose effect was not there (w: wrap did not flip)
    lines_per_s: float = 0.0
    matches_per_s: float = 0.0
    behind: int = 0  # lines the ranks wrote that the backend had not read at the end
    queued: int = 0  # lines the backend had read that the log store did not have yet
    fps: float = 0.0
    cpu_pct: float = 0.0
    ranks_cpu_pct: float = 0.0  # the demo ranks and their supervisors
    not_ready: dict[int, str] = field(default_factory=dict)  # ranks not ready at the end
    start: float = 0.0  # perf_counter when timing began
    gc_pauses: list[float] = field(default_factory=list)
    ready_s: float = 0.0
    grep_s: float = 0.0
    view_lines: int = 0
    stopped: list[int] = field(default_factory=list)  # rank processes stopped for the count
    written: int = 0  # lines the ranks wrote (their outputs, after they were stopped)
    stored: int = 0  # lines in the console's store (by line number) after it caught up
    gaps: int = 0  # holes in the line numbers of the store's windows
    missing: dict[int, int] = field(default_factory=dict)  # rank -> lines written, not received
    matches_expected: int = 0  # lines of the outputs the grep matches
    matches_shown: int = 0  # the console's match count
    drain_s: float = 0.0  # from the ranks stopping to the console holding every line


def rank_outputs(session: Any) -> dict[int, Path]:
    """Each rank's ``output.log`` (what the local runtime's supervisor captured of the rank)."""
    out = {}
    for info in session.orch.ranks:
        state_dir = getattr(session.orch.runtimes[info.node.name], "state_dir", None)
        if state_dir is not None and info.container_id:
            out[info.rank] = Path(state_dir) / info.container_id / "output.log"
    return out


def engine_pids(marker: str) -> list[int]:
    """The demo rank processes themselves (not their supervisors)."""
    pids = []
    for pid in leftover_pids(marker):
        with contextlib.suppress(OSError):
            if b"sparktui.demo.engine" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
    return pids


def written_lines(paths: dict[int, Path], pattern: str) -> tuple[dict[int, int], int]:
    """(lines per rank, lines of every rank that ``pattern`` matches) in the ranks' outputs: what
    the ranks wrote, to compare with what reached the console (runs in a thread)."""
    from sparktui.core.linefilter import LineFilter

    f = LineFilter.parse(pattern)
    counts: dict[int, int] = {}
    matching = 0
    for rank, path in paths.items():
        n = 0
        with open(path, "rb") as handle:
            for raw in handle:
                n += 1
                text = raw.decode("utf-8", "replace").rstrip("\n").partition(" ")[2]
                matching += f.matches(text)
        counts[rank] = n
    return counts, matching


async def count_check(main: Any, session: Any, world: int, res: Result) -> None:
    """Every line received: stop the ranks (SIGSTOP), let the pipes drain, then wait until the
    console's store holds every line each rank wrote, with no gap in the line numbers, and the
    grep's count equals the matching lines of the ranks' outputs."""
    logs = main.logs
    pids = engine_pids(os.environ["XDG_STATE_HOME"])
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    res.stopped = pids
    paths = rank_outputs(session)
    sizes: dict[int, int] = {}
    for _ in range(50):  # the supervisors copy what is left in the pipes
        await asyncio.sleep(0.2)
        now = {r: p.stat().st_size for r, p in paths.items()}
        if now == sizes:
            break
        sizes = now
    counts, matching = await asyncio.to_thread(written_lines, paths, GREP)
    res.written = sum(counts.values())
    t0 = time.perf_counter()
    with contextlib.suppress(RuntimeError):
        await until(lambda: all(main.store.last_no(r) >= counts.get(r, 0) for r in range(world))
                    and logs.model.matches == matching and not logs._pending, 30, "the console to catch up")
    res.drain_s = time.perf_counter() - t0
    res.stored = sum(main.store.last_no(r) for r in range(world))
    nos = [[line[2] for line in main.store.lines(r)] for r in range(world)]
    res.gaps = sum(1 for ns in nos for a, b in itertools.pairwise(ns) if b != a + 1)
    res.matches_expected, res.matches_shown = matching, logs.model.matches or 0
    res.missing = {r: counts.get(r, 0) - main.store.last_no(r) for r in range(world)
                   if main.store.last_no(r) != counts.get(r, 0)}


def unread_lines(session: Any) -> int:
    """Lines the ranks wrote that the console had not read yet (after its log cursor)."""
    run = session.orch.run
    cursors = run.cursors() if run is not None else {}
    total = 0
    for info in session.orch.ranks:
        rt = session.orch.runtimes[info.node.name]
        state_dir = getattr(rt, "state_dir", None)
        saved = cursors.get(info.rank, {})
        if state_dir is None or not info.container_id or saved.get("container_id") != info.container_id:
            continue
        try:
            with open(Path(state_dir) / info.container_id / "output.log", "rb") as f:
                f.seek(int(saved.get("cursor") or 0))
                total += f.read().count(b"\n")
        except OSError:
            pass
    return total


async def measure(recipes: Path, args: argparse.Namespace, gcw: GcWatch) -> Result:
    from sparktui.config import state_dir
    from sparktui.ui.app import SparkApp
    from sparktui.ui.gcpolicy import settle
    from sparktui.ui.options import ConsoleOptions

    cols, rows = (int(x) for x in args.size.split("x"))
    keys = [k.strip() for k in args.keys.split(",") if k.strip()]
    app = SparkApp(ConsoleOptions([recipes], None, state_root=state_dir(), recipe=SLUG))
    if not args.default_gc:
        settle()  # as run_console does before the console starts
    res = Result(latencies={k: [] for k in keys})
    async with app.run_test(size=(cols, rows)) as pilot:
        main = app.main_screen
        await until(main.ready.is_set, 30, "the recipe to open")
        session = main.session
        if session is None or session.slug != SLUG:
            raise RuntimeError(f"{SLUG} did not open (events: {[e.text for e in main.state.notices]})")
        table, logs = main.ranks_table, main.logs
        t_up = time.perf_counter()
        await pilot.press("u")
        await until(lambda: all(table.states.get(r) == "ready" for r in range(args.ranks)), 60,
                    "every rank ready")
        res.ready_s = time.perf_counter() - t_up
        print(f"ui_flood: every rank ready {res.ready_s:.1f} s after u", flush=True)

        # the grep, typed: keys go straight to the driver (Pilot.press waits for an idle process)
        t_grep = time.perf_counter()
        send_key(app, "slash")
        await until(lambda: logs.grep_input.has_focus, 10, "the grep input")
        for ch in GREP:
            send_key(app, ch)
        await until(lambda: logs.model.pending_filter.text == GREP, 10, "the pattern typed")
        send_key(app, "enter")
        await until(lambda: logs.model.line_filter.text == GREP and not logs.model.scanning
                    and logs.view.has_focus,
                    60, "the grep applied")
        res.grep_s = time.perf_counter() - t_grep
        print(f"ui_flood: grep {GREP!r} applied in {res.grep_s:.2f} s; measuring for {args.seconds:g} s",
              flush=True)

        if args.grid:  # a pane per rank (tabs beyond 8): every rank's view fed at once
            send_key(app, "g")
            await until(lambda: logs.model.grid and len(logs.panes.views) == args.ranks, 20,
                        "the grid")
            print(f"ui_flood: the grid is open ({len(logs.panes.views)} panes)", flush=True)

        if args.pulse:  # the pulse view open over the flood: its keys are the ones timed
            from sparktui.ui.screens.pulse_screen import PulseScreen
            send_key(app, "P")
            await until(lambda: isinstance(app.screen, PulseScreen), 10, "the pulse view")
            await until(lambda: 0 in session.orch.metrics.pulses, 15, "a first scrape")
            print("ui_flood: the pulse view is open", flush=True)

        probe = FrameProbe(app)
        period = 1.0 / args.rate
        received0 = sum(main.store.last_no(r) for r in range(args.ranks))
        matches0 = logs.model.matches or 0
        frames0 = probe.frames
        cpu0 = time.process_time()
        rank_pids = leftover_pids(os.environ["XDG_STATE_HOME"])
        ranks_cpu0 = cpu_seconds(rank_pids)
        res.start = start = time.perf_counter()
        end = start + args.seconds
        next_at = start
        i = 0
        while time.perf_counter() < end:
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            key = keys[i % len(keys)]
            i += 1
            wrap_before = logs.view.wrap
            waiter = probe.arm()
            wait0, cpu0_press = run_queue_wait(), time.thread_time()
            t0 = time.perf_counter()
            send_key(app, key)
            try:
                t1 = await asyncio.wait_for(waiter, 10.0)
            except asyncio.TimeoutError:
                res.timeouts += 1
            else:
                res.latencies[key].append(t1 - t0)
                res.to_action.append(probe.action_at - t0)
                res.cpu_wait.append((t1 - t0, run_queue_wait() - wait0, time.thread_time() - cpu0_press))
                if key == "w" and logs.view.wrap == wrap_before:
                    res.wrong += 1
            next_at = max(next_at + period, time.perf_counter())
        res.seconds = time.perf_counter() - start
        res.gc_pauses = gcw.between(start, start + res.seconds)
        res.cpu_pct = 100 * (time.process_time() - cpu0) / res.seconds
        ranks_cpu1 = cpu_seconds(rank_pids)
        res.ranks_cpu_pct = 100 * sum(t - ranks_cpu0[p] for p, t in ranks_cpu1.items() if p in ranks_cpu0) \
            / res.seconds
        res.not_ready = {r: str(table.states.get(r)) for r in range(args.ranks)
                         if table.states.get(r) != "ready"}
        received = sum(main.store.last_no(r) for r in range(args.ranks)) - received0
        res.lines_per_s = received / res.seconds
        res.matches_per_s = ((logs.model.matches or 0) - matches0) / res.seconds
        res.fps = (probe.frames - frames0) / res.seconds
        res.behind = await asyncio.to_thread(unread_lines, session)
        run = session.orch.run
        if run is not None:
            res.queued = sum(run.log(r).count - main.store.last_no(r) for r in range(args.ranks))
        res.view_lines = len(logs.view.lines)
        await count_check(main, session, args.ranks, res)
        await app.action_quit()
    return res


def report(res: Result, rss: RssSampler, args: argparse.Namespace) -> bool:
    mib = 1024.0
    every = [v for vs in res.latencies.values() for v in vs]
    ok = True
    print(f"\nUI flood: {args.ranks} ranks x {args.flood} lines/s, grep {GREP!r}, terminal {args.size}, "
          f"{res.seconds:.0f} s, {len(every)} presses at ~{args.rate:g}/s")
    if every:
        p50, p95 = pct(every, 0.50) * 1e3, pct(every, 0.95) * 1e3
        ok &= p95 < P95_TARGET_MS and not res.timeouts and not res.wrong
        print(f"  key to screen: p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(every) * 1e3:.1f} ms"
              f"  (target p95 < {P95_TARGET_MS:g} ms: {'met' if p95 < P95_TARGET_MS else 'MISSED'})")
        waits = [w * 1e3 for _, w, _ in res.cpu_wait]
        own = [(lat - w) * 1e3 for lat, w, _ in res.cpu_wait]
        used = [c * 1e3 for _, _, c in res.cpu_wait]
        print(f"    of which the loop's thread stood runnable, waiting for a CPU (other processes): "
              f"p50 {pct(waits, .5):.1f} ms, p95 {pct(waits, .95):.1f} ms; "
              f"key to screen less that wait: p50 {pct(own, .5):.1f} ms, p95 {pct(own, .95):.1f} ms")
        print(f"    CPU time the loop's thread used from key to screen (its work, whatever the load): "
              f"p50 {pct(used, .5):.1f} ms, p95 {pct(used, .95):.1f} ms")
        acts = [a * 1e3 for a in res.to_action]
        print(f"    of which key to action done: p50 {pct(acts, .5):.1f} ms, p95 {pct(acts, .95):.1f} ms; "
              "the rest is waiting for and making the next frame")
        if len(res.latencies) > 1:
            for key, vs in res.latencies.items():
                if vs:
                    print(f"    {key}: p50 {pct(vs, .5) * 1e3:.1f} ms, "
                          f"p95 {pct(vs, .95) * 1e3:.1f} ms ({len(vs)})")
    else:
        ok = False
        print("  no press was measured")
    if res.not_ready:
        ok = False
        print(f"  NOT A VALID RUN: ranks not ready at the end: {res.not_ready} (the flood was smaller)")
    if res.timeouts or res.wrong:
        print(f"  presses with no frame within 10 s: {res.timeouts}; without their effect: {res.wrong}")
    print(f"  lines received by the app: {res.lines_per_s:,.0f}/s "
          f"(the ranks write {args.ranks * args.flood:,}/s); "
          f"grep matches {res.matches_per_s:,.0f}/s; at the end {res.behind:,} lines not read yet, "
          f"{res.queued:,} read but not yet in the view's store")
    print(f"  frames {res.fps:.1f}/s; CPU: app process {res.cpu_pct:.0f} % of one core, demo ranks and "
          f"their supervisors {res.ranks_cpu_pct:.0f} %; log view holds {res.view_lines:,} lines")
    received_ok = not res.missing and not res.gaps and res.matches_shown == res.matches_expected
    ok &= received_ok
    print(f"  every line received: {'yes' if received_ok else 'NO'} (ranks stopped after the "
          f"measurement: {res.written:,} lines written, {res.stored:,} in the console's store "
          f"{res.drain_s:.1f} s later, gaps {res.gaps}, missing per rank {res.missing or 'none'}; "
          f"grep count {res.matches_shown:,} of {res.matches_expected:,} matching lines written)")
    if res.gc_pauses:
        print(f"  full GC collections: {len(res.gc_pauses)}, {sum(res.gc_pauses) / res.seconds:.1%} of the "
              f"time, median {statistics.median(res.gc_pauses) * 1e3:.0f} ms, max "
              f"{max(res.gc_pauses) * 1e3:.0f} ms (the loop stands still meanwhile)")
    window = [(t - res.start, kib) for t, kib in rss.samples if t >= res.start]
    if window:
        since = args.flat_from
        at10 = rss.at(res.start + since)
        at_end = window[-1][1]
        peak = max(kib for _, kib in rss.samples)
        hwm = RssSampler.rss_kib("VmHWM")
        growth = (at_end - at10) / at10
        ok &= growth < FLAT_TARGET
        print(f"  app process RSS (this process only; the demo ranks are separate processes, not counted): "
              f"{since:g} s {at10 / mib:.1f} MiB, end {at_end / mib:.1f} MiB ({growth:+.1%} from "
              f"{since:g} s; target "
              f"< {FLAT_TARGET:.0%}: {'met' if growth < FLAT_TARGET else 'MISSED'}), "
              f"peak {peak / mib:.1f} MiB (VmHWM {hwm / mib:.1f} MiB)")
        marks = [rss.at(res.start + s) for s in range(0, int(res.seconds) + 1, 10)]
        print("  RSS every 10 s: " + ", ".join(f"{kib / mib:.0f}" for kib in marks) + " MiB")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to measure (default 60)")
    ap.add_argument("--ranks", type=int, default=WORLD, help=f"demo ranks, each on a local node "
                    f"(default {WORLD})")
    ap.add_argument("--flood", type=int, default=2000, help="lines per second per rank (default 2000)")
    ap.add_argument("--rate", type=float, default=5.0, help="presses per second (default 5)")
    ap.add_argument("--keys", default=None, help="keys to press in turn, comma-separated (default w; "
                    "with --pulse z, the pulse view's span)")
    ap.add_argument("--pulse", action="store_true",
                    help="open the pulse view (P) after the grep, and time its keys")
    ap.add_argument("--grid", action="store_true",
                    help="show the ranks side by side (g) after the grep: a pane per rank")
    ap.add_argument("--flat-from", type=float, default=10.0, metavar="SECONDS",
                    help="RSS growth is measured from this moment to the end (default 10; "
                         "issue 30 takes 60 over a 600 s run)")
    ap.add_argument("--size", default="160x50", help="terminal columns x rows (default 160x50)")
    ap.add_argument("--port", type=int, default=30400, help="the recipe's port, rank r on port + r")
    ap.add_argument("--secrets", action="store_true",
                    help="give the ranks an API key and an HF token (every line searched for them)")
    ap.add_argument("--profile", metavar="FILE", help="write a cProfile of the whole run to FILE")
    ap.add_argument("--default-gc", action="store_true",
                    help="leave Python's garbage collector as it is (the console settles it: gcpolicy)")
    args = ap.parse_args()
    if args.keys is None:
        args.keys = "z" if args.pulse else "w"
    if not re.fullmatch(r"\d+x\d+", args.size):
        ap.error("--size: COLUMNSxROWS, for example 160x50")
    busy = [p for p in (DIST_INIT_PORT, *range(args.port, args.port + args.ranks)) if not port_free(p)]
    if busy:
        print(f"ui_flood: port(s) {busy} in use (another demo running?); try --port", file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="sparktui-ui-flood-"))
    os.environ["XDG_STATE_HOME"] = str(tmp / "state")
    os.environ["XDG_CONFIG_HOME"] = str(tmp / "config")
    for name in ("SPARKTUI_CLUSTER", "SPARKTUI_RECIPES"):
        os.environ.pop(name, None)  # the built-in local cluster; our recipes folder only
    recipes = flood_recipe(tmp / "recipes", args.flood, args.port, args.ranks, args.secrets)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still down and clean up

    rss = RssSampler()
    rss.start()
    gcw = GcWatch()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    res: Result | None = None
    try:
        res = asyncio.run(measure(recipes, args, gcw))
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        rss.halt.set()
        for pid in engine_pids(str(tmp)):  # stopped for the count check: down must reach them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        problem = down(recipes)
        if problem:
            print(f"ui_flood: down: {problem}", file=sys.stderr)
        found, left = kill_leftovers(str(tmp))
        if found:
            print(f"ui_flood: LEAK: processes still running after down: {found} (killed; survivors: "
                  f"{left})", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    if res is None:
        return 1
    ok = report(res, rss, args)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"  (max RSS by getrusage: {usage.ru_maxrss / 1024:.1f} MiB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
