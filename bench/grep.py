"""Grep over everything a run captured: ``sparktui logs --grep`` and the console's grep, against
``grep -E`` on the same files, in the same run.

Generates a run of 4 ranks x 250,000 SGLang-like lines (``Decode batch. #running-req: 61, #token:
42876, ...``, prefill batches, access-log lines: 1 M lines, about 140 MB) in the run store's
format (``<ts>\\t<text>``, docker's trimmed nanosecond stamps), in a temporary state folder.

1. The command line, as a user runs it (a new process each time, its start included; the wheel
   built from this checkout and installed in a fresh environment, ``bench/wheel.py``, unless
   ``--checkout``):
   ``sparktui logs RECIPE --grep PATTERN`` over the run (which ended: ``down`` recorded) against
   ``grep -hE PATTERN`` over the four files, both read to the end through a pipe, alternating,
   one warm-up each, then the median of ``--repeat``. The same lines must come out (as a
   multiset of texts). Also timed: ``python -c pass`` and ``import sparktui.cli`` (the part of
   the command's time that is the CLI's start, not the grep).
2. The console (the real app, headless under ``App.run_test``): the recipe is launched on the
   local cluster (demo engines, the bench's own ports), the generated lines are put in front of
   its run's files as history (the saved cursors moved along), then the console opens it with
   its default window (10,000 lines per rank in memory). Each round applies a grep and times
   the first screen of matches (the first frame showing a screenful of them) and the full count
   (the first frame whose bar shows the whole run's count: every file searched); meanwhile
   characters are typed into the grep input (``x``, then backspace: the pattern stays) about
   every 30 ms and each is timed from the key event to the first frame showing it (frames are
   rendered to segments as a terminal would get them). The count must equal the files' matches.

Targets (issue 13): ``logs --grep`` <= 2x grep; console first screen <= 0.3 s, full count <= 2x
grep, keypress p95 < 50 ms while the scan runs. Exit status 1 when one is missed.

    python bench/grep.py [--lines 250000] [--repeat 5] [--pattern '#running-req: 6[0-4],'] [--ranks 4]
                         [--no-console] [--port 30500] [--size 160x50] [--checkout]

``GREP_BENCH_DEBUG=1`` prints each console round (first screen, scan result, full count).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.demo_run import demo_recipe, kill_leftovers, pct, port_free, send_key  # noqa: E402

SLUG = "demo-tp4-grep"
WORLD = 4
PATTERNS = ("#running-req: 6[0-4],", "#running-req: 5[0-4],")  # the console alternates: a new scan
DIST_INIT_PORT = 25000


# -- the run -----------------------------------------------------------------------------------
def stamp(t: float) -> str:
    """Docker's RFC 3339 with nanoseconds, trailing zeros trimmed."""
    whole = int(t)
    frac = f"{int((t - whole) * 1e9):09d}".rstrip("0")
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + (f".{frac}" if frac else "") + "Z"


def rank_lines(rank: int, count: int, start: float) -> bytes:
    """``count`` lines of an SGLang rank under load: decode batches (their #running-req a walk
    between 1 and 64), prefill batches, the API's access log."""
    rnd = random.Random(13 * 1000 + rank)
    t = start + rnd.random()
    running = rnd.randint(1, 64)
    out = []
    for _ in range(count):
        t += rnd.expovariate(20.0)
        running = min(64, max(1, running + rnd.choice((-3, -2, -1, 0, 0, 1, 2, 3))))
        tokens = running * 700 + rnd.randint(0, 699)
        r = rnd.random()
        if r < 0.88:
            rate = running * 37.5 + rnd.random() * 40
            text = (f"Decode batch. #running-req: {running}, #token: {tokens}, token usage: "
                    f"{tokens / 460000:.2f}, gen throughput (token/s): {rate:.2f}, "
                    f"#queue-req: {rnd.randint(0, 3)}")
        elif r < 0.96:
            text = (f"Prefill batch. #new-seq: 1, #new-token: {rnd.randint(16, 4096)}, #cached-token: "
                    f"{rnd.randint(0, 2048)}, token usage: {tokens / 460000:.2f}, #running-req: {running}, "
                    f"#queue-req: {rnd.randint(0, 3)}")
        else:
            text = (f'INFO:     10.0.{rank}.{rnd.randint(2, 250)}:{rnd.randint(32768, 60999)} - '
                    f'"POST /v1/chat/completions HTTP/1.1" 200 OK')
        out.append(f"{stamp(t)}\t{text}\n")
    return "".join(out).encode()


def bench_recipe(folder: Path, port: int) -> Path:
    """``recipes/demo-tp4`` with a 0 s boot and its own ports."""
    return demo_recipe(folder, SLUG, [('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"'),
                                      ("\nport = 30000\n", f"\nport = {port}\n")], "grep bench")


def sparktui_cmd() -> list[str]:
    script = Path(sys.executable).with_name("sparktui")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sparktui"]


def timed(cmd: list[str]) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"grep bench: {' '.join(cmd)} exited {done.returncode}: "
                         f"{done.stderr.decode()[-500:]}")
    return seconds, done.stdout


# -- 1. the command line ---------------------------------------------------------------------------
@dataclass
class CliResult:
    sparktui: list[float] = field(default_factory=list)
    grep: list[float] = field(default_factory=list)
    same: bool = False
    matches: int = 0
    python: float = 0.0
    cli_import: float = 0.0


def bench_cli(recipes: Path, files: list[Path], pattern: str, repeat: int,
              python: str = sys.executable) -> CliResult:
    """``python``: the interpreter whose ``sparktui`` runs (an installed wheel's, see --checkout)."""
    res = CliResult()
    ours = [str(Path(python).with_name("sparktui")), "logs", "--recipes", str(recipes), SLUG,
            "--grep", pattern]
    theirs = ["grep", "-hE", pattern, *map(str, files)]
    for i in range(repeat + 1):  # the first of each warms the page cache and the imports
        t_grep, out_grep = timed(theirs)
        t_ours, out_ours = timed(ours)
        if i:
            res.grep.append(t_grep)
            res.sparktui.append(t_ours)
        else:
            texts = collections.Counter(line.split(b" ", 1)[1] for line in out_ours.splitlines())
            want = collections.Counter(line.split(b"\t", 1)[1] for line in out_grep.splitlines())
            res.same, res.matches = texts == want, sum(want.values())
    res.python = statistics.median(timed([python, "-c", "pass"])[0] for _ in range(5))
    res.cli_import = statistics.median(timed([python, "-c", "import sparktui.cli"])[0]
                                       for _ in range(5))
    return res


# -- 2. the console ---------------------------------------------------------------------------------
@dataclass
class ConsoleResult:
    first_screen: list[float] = field(default_factory=list)
    full_count: list[float] = field(default_factory=list)
    keys: list[float] = field(default_factory=list)
    timeouts: int = 0
    counts: list[int] = field(default_factory=list)
    expected: list[int] = field(default_factory=list)
    window: int = 0


class Frames:
    """Every frame the compositor makes (``App._display``), rendered to segments as a terminal
    would be sent them; a waiter resolves with the first frame for which ``when()`` holds."""

    def __init__(self, app: Any) -> None:
        self.waiters: list[tuple[Any, asyncio.Future[float]]] = []
        display = app._display

        def probe(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            if renderable is None:
                return
            if app.is_headless and hasattr(renderable, "render_segments"):
                renderable.render_segments(app.console)
            now = time.perf_counter()
            for when, fut in list(self.waiters):
                if not fut.done() and when():
                    fut.set_result(now)
                    self.waiters.remove((when, fut))

        app._display = probe

    def first(self, when: Any) -> asyncio.Future[float]:
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiters.append((when, fut))
        return fut


async def until(what: Any, timeout: float, why: str) -> None:
    end = time.monotonic() + timeout
    while not what():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {why}")
        await asyncio.sleep(0.02)


def count_matches(paths: list[Path], pattern: str) -> int:
    from sparktui.core.blockgrep import BlockSearch
    from sparktui.core.linefilter import LineFilter
    from sparktui.core.rungrep import RunScan

    return RunScan(dict(enumerate(paths)), BlockSearch.of(LineFilter.parse(pattern)), cap=0).run().total


async def console_rounds(recipes: Path, args: argparse.Namespace) -> ConsoleResult:
    from sparktui.config import state_dir
    from sparktui.ui.app import SparkApp
    from sparktui.ui.gcpolicy import settle
    from sparktui.ui.options import ConsoleOptions

    cols, rows = (int(x) for x in args.size.split("x"))
    app = SparkApp(ConsoleOptions([recipes], None, state_root=state_dir(), recipe=SLUG))
    settle()  # as run_console does
    res = ConsoleResult()
    async with app.run_test(size=(cols, rows)) as _pilot:
        main = app.main_screen
        await until(main.ready.is_set, 60, "the recipe to open")
        logs, store = main.logs, main.store
        await until(lambda: logs.model.run is not None and all(len(store.lines(r)) == store.window
                                                         for r in range(WORLD)), 60, "the windows")
        res.window = store.window
        run = logs.model.run
        assert run is not None
        frames = Frames(app)
        marks: dict[str, float] = {}
        grep = logs.grep
        if os.environ.get("GREP_BENCH_DEBUG") and grep is not None:
            history = grep.grep_history

            async def timed_history(*a: Any, **k: Any) -> Any:
                async for progress in history(*a, **k):
                    if progress.result is not None:
                        marks["result"] = time.perf_counter()
                    yield progress
            grep.grep_history = timed_history  # type: ignore[method-assign]
        logs.open_grep()
        await until(lambda: logs.grep_input.has_focus, 10, "the grep input")
        for i in range(args.repeat + 1):
            pattern = PATTERNS[i % 2]
            paths = [run.log(r).path for r in range(WORLD)]
            first = frames.first(lambda p=pattern: logs.model.line_filter.text == p
                                 and len(logs.view.lines) >= rows)
            full = frames.first(lambda p=pattern: logs.model.line_filter.text == p
                                and (logs.model.counted or not logs.model.scanning))
            t0 = time.perf_counter()
            logs.apply_grep_now(pattern)
            typed: list[float] = []
            while not full.done():  # move in the pattern while it scans (a new character
                # would start a new scan once the 0.12 s debounce passed)
                end = len(logs.grep_input.value)
                key, after = ("left", end - 1) if logs.grep_input.cursor_position == end else ("right", end)
                shown = frames.first(lambda after=after: logs.grep_input.cursor_position == after)
                k0 = time.perf_counter()
                send_key(app, key)
                try:
                    typed.append(await asyncio.wait_for(shown, 5.0) - k0)
                except asyncio.TimeoutError:
                    res.timeouts += 1
                await asyncio.sleep(max(0.0, 0.03 - (time.perf_counter() - k0)))
            t_full = await full
            t_first = await asyncio.wait_for(first, 10.0)
            if os.environ.get("GREP_BENCH_DEBUG"):
                print(f"round {i}: first {t_first - t0:.3f} result {marks.get('result', 0) - t0:.3f} "
                      f"full {t_full - t0:.3f} keys {len(typed)} end {time.perf_counter() - t0:.3f}",
                      flush=True)
            if i:  # the first round warms the page cache
                res.first_screen.append(t_first - t0)
                res.full_count.append(t_full - t0)
                res.keys.extend(typed)
                res.counts.append(logs.model.matches or 0)
                res.expected.append(await asyncio.to_thread(count_matches, paths, pattern))
        await app.action_quit()
    return res


def run_console(recipes: Path, history: list[bytes], args: argparse.Namespace) -> ConsoleResult:
    """Launch, put the history in front of the run's files, measure, and always take it down."""
    from sparktui.config import state_dir
    from sparktui.core.runstore import RunStore

    up = subprocess.run([*sparktui_cmd(), "up", "--recipes", str(recipes), SLUG, "--wait"],
                        capture_output=True, text=True, timeout=180, check=False)
    if up.returncode:
        raise SystemExit(f"grep bench: up failed: {up.stderr[-800:]}")
    run = RunStore(state_dir()).latest(SLUG)
    assert run is not None
    cursors = json.loads((run.dir / "cursors.json").read_text())
    for rank, data in enumerate(history):
        path = run.log(rank).path
        path.write_bytes(data + path.read_bytes())
        cursors[str(rank)]["lines"] += data.count(b"\n")
        cursors[str(rank)]["bytes"] += len(data)
    (run.dir / "cursors.json").write_text(json.dumps(cursors))
    return asyncio.run(console_rounds(recipes, args))


def down(recipes: Path, marker: str) -> None:
    subprocess.run([*sparktui_cmd(), "down", "--recipes", str(recipes), SLUG], capture_output=True,
                   timeout=120, check=False)
    found, _left = kill_leftovers(marker)
    if found:
        print(f"grep bench: LEAK: processes left after down: {found} (killed)", file=sys.stderr)


# -- report -----------------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def report(cli: CliResult, console: ConsoleResult | None, size: int, lines: int, pattern: str,
           ranks: int = WORLD) -> bool:
    ok = True
    ours, theirs = statistics.median(cli.sparktui), statistics.median(cli.grep)
    ratio = ours / theirs
    ok &= ratio <= 2.0 and cli.same
    print(f"\ngrep bench: {ranks} ranks x {lines:,} lines ({ranks * lines:,} lines, {size / 1e6:.0f} MB), "
          f"pattern {pattern!r}; {os.cpu_count()} CPUs ({cpu_model()}), Python {platform.python_version()}")
    print(f"  sparktui logs --grep (new process): median {ours:.3f} s "
          f"(min {min(cli.sparktui):.3f}, max {max(cli.sparktui):.3f})")
    print(f"  grep -hE (same files):              median {theirs:.3f} s "
          f"(min {min(cli.grep):.3f}, max {max(cli.grep):.3f})")
    print(f"  ratio {ratio:.2f}x (target <= 2x: {'met' if ratio <= 2.0 else 'MISSED'}); "
          f"same {cli.matches:,} matching lines: {'yes' if cli.same else 'NO'}")
    print(f"  of which starting Python: {cli.python:.3f} s; importing sparktui.cli: {cli.cli_import:.3f} s")
    if console is None:
        return ok
    first, full = statistics.median(console.first_screen), statistics.median(console.full_count)
    full_ratio = full / theirs
    p50, p95 = pct(console.keys, 0.5) * 1e3, pct(console.keys, 0.95) * 1e3 if console.keys else float("nan")
    right = console.counts == console.expected
    ok &= first <= 0.3 and full_ratio <= 2.0 and p95 < 50 and right and not console.timeouts
    print(f"  console (window {console.window:,} lines per rank, the rest in the files; patterns "
          f"{' / '.join(PATTERNS)} in turn):")
    print(f"    first screen of matches: median {first * 1e3:.0f} ms "
          f"(target <= 300 ms: {'met' if first <= 0.3 else 'MISSED'})")
    print(f"    full count: median {full:.3f} s = {full_ratio:.2f}x grep "
          f"(target <= 2x: {'met' if full_ratio <= 2.0 else 'MISSED'}); counts {console.counts} "
          f"{'= the files' if right else f'!= the files {console.expected}'}")
    print(f"    typing while it scans: {len(console.keys)} keys, key to screen p50 {p50:.1f} ms, "
          f"p95 {p95:.1f} ms, max {max(console.keys) * 1e3:.1f} ms "
          f"(target p95 < 50 ms: {'met' if p95 < 50 else 'MISSED'}); no frame within 5 s: {console.timeouts}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=250_000, help="lines per rank (default 250,000)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of each (default 5; medians)")
    ap.add_argument("--pattern", default=PATTERNS[0],
                    help=f"the command line's pattern (default {PATTERNS[0]!r})")
    ap.add_argument("--ranks", type=int, default=WORLD,
                    help=f"ranks in the ended run the command line greps (default {WORLD}; "
                         f"another count implies --no-console: the console's recipe has {WORLD})")
    ap.add_argument("--no-console", action="store_true", help="the command line only")
    ap.add_argument("--port", type=int, default=30500, help="the demo recipe's port, rank r on port + r")
    ap.add_argument("--size", default="160x50", help="the console's terminal, COLUMNSxROWS")
    ap.add_argument("--checkout", action="store_true",
                    help="time this checkout's sparktui (an editable install) instead of the "
                         "wheel built from it, as a user has it")
    args = ap.parse_args()
    if args.ranks != WORLD:
        args.no_console = True
    if shutil.which("grep") is None:
        print("grep bench: needs grep", file=sys.stderr)
        return 2
    if not args.no_console:
        busy = [p for p in (DIST_INIT_PORT, *range(args.port, args.port + WORLD)) if not port_free(p)]
        if busy:
            print(f"grep bench: port(s) {busy} in use (another demo?); try --port", file=sys.stderr)
            return 2

    tmp = Path(tempfile.mkdtemp(prefix="sparktui-grep-bench-"))
    os.environ["XDG_STATE_HOME"] = str(tmp / "state")
    os.environ["XDG_CONFIG_HOME"] = str(tmp / "config")
    for name in ("SPARKTUI_CLUSTER", "SPARKTUI_RECIPES"):
        os.environ.pop(name, None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    recipes = bench_recipe(tmp / "recipes", args.port)
    console: ConsoleResult | None = None
    try:
        t0 = time.perf_counter()
        start = time.time() - 30 * 86400  # a month ago: older than anything the demo writes
        history = [rank_lines(rank, args.lines, start) for rank in range(args.ranks)]
        ended = tmp / "state" / "sparktui" / "runs" / f"{SLUG}-20000101-000000"  # sorts first
        ended.mkdir(parents=True)
        files = []
        for rank, data in enumerate(history):
            (ended / f"r{rank}.log").write_bytes(data)
            files.append(ended / f"r{rank}.log")
        (ended / "events.jsonl").write_text(
            json.dumps({"ts": stamp(start), "kind": "up"}) + "\n"
            + json.dumps({"ts": stamp(start + 86400), "kind": "down", "kept": []}) + "\n")
        size = sum(map(len, history))
        print(f"grep bench: {args.ranks * args.lines:,} lines ({size / 1e6:.0f} MB) generated in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        python = sys.executable
        if args.checkout:
            from bench.wheel import compiled

            compiled()
        else:
            from bench.wheel import build, install

            python = str(install(build(tmp / "wheel"), tmp / "venv"))
        cli = bench_cli(recipes, files, args.pattern, args.repeat, python)
        print(f"grep bench: command line done ({statistics.median(cli.sparktui):.3f} s vs grep "
              f"{statistics.median(cli.grep):.3f} s)", flush=True)
        if not args.no_console:
            try:
                console = run_console(recipes, history, args)
            finally:
                down(recipes, str(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if report(cli, console, size, args.lines, args.pattern, args.ranks) else 1


if __name__ == "__main__":
    sys.exit(main())
