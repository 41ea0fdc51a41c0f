"""The soak: a seeded schedule of faults against a running group, checked against the truth.

One ``Soak`` is one seed: the demo recipe (a rank a node, ticking ``TICK_S`` apart, a secret in
its environment, a ``[restart]`` watchdog with a budget the soak cannot spend) is launched on the
test cluster in a state folder of its own, ``sparktui watch`` follows it, and faults drawn from
``faults.TABLE`` (the seed decides which, where, for how long and the gaps) hit it until the
count or the time is reached. A gap may be shorter than the group takes to come back, so faults
also land on a group being restarted. After a fault, often (and always at the end) the checkers
run:

- ``states``: ``status --json`` agrees with what Docker runs on each node (each rank's running
  container is the one sparktui names, in a running state; a rank with none is failed or
  stopped) within ``TRUTH_BOUND_S`` of the fault's end; the worst time is reported;
- ``lines``: every rank's file holds each of its containers' ticks 1, 2, 3, ... exactly once and
  in order, the current container's up to what Docker holds, a replaced one's at least up to
  the last tick the recorder saw;
- at the end: the watchdog restarted within its budget, ``down`` leaves no container of the run
  on any node and no sparktui process, no output has a traceback, the secret is in no file.

A violation raises ``Violation`` with the seed, the faults so far and the first broken invariant.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sparktui_testbed as tbm
from sparktui.core.dockerview import short_id
from sparktui.core.slurmjob import job_name
from sparktui_testbed import faults as tbf
from tests.chaos import faults as table
from tests.chaos.truth import DOCKER_ERRORS, Docker, Recorder, first_break, names, segments
from tests.conftest import RECIPES, ROOT
from tests.runner import TRACEBACK, state_env

WORLD = 4
TICK_S = 0.1
"""Ten numbered lines a second a rank: gaps and doubles show within a fault."""
SECRET = "sptb-chaos-secret-7f3a9c"
TRUTH_BOUND_S = 45.0
"""After a fault ends, sparktui's states agree with Docker's within this (a group restarted by
the watchdog included: the group falls, is replaced and boots)."""
STATE_MIB = 64
"""The tmpfs the run's files live on (filled by ``disk-fill``): hours of ticks fit in it."""
BUDGET = 100
WINDOW = "10m"
WINDOW_S = 600.0
DOWN_SLURM_S = 30.0
"""The most the recipe allows: a soak restarts the group a few times a minute at most."""


class Violation(AssertionError):
    """An invariant broken: the seed, the fault sequence and what broke."""


@dataclass
class Injected:
    at: float  # seconds since the soak began
    kind: str
    target: str
    hold: float

    def __str__(self) -> str:
        return f"{self.at:7.1f}s {self.kind:<14} {self.target} (held {self.hold:g} s)"


@dataclass
class Report:
    seed: int
    faults: list[Injected] = field(default_factory=list)
    lines_checked: int = 0
    worst_truth_s: float = 0.0
    checks: int = 0
    seconds: float = 0.0
    restarts: int = 0
    worst_console_s: float = 0.0

    def kinds(self) -> collections.Counter[str]:
        return collections.Counter(f.kind for f in self.faults)

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kinds().items()))
        return (f"seed {self.seed}: {len(self.faults)} faults in {self.seconds:.0f} s ({kinds}); "
                f"{self.checks} checks, {self.lines_checked:,} lines checked, the watchdog "
                f"restarted {self.restarts} times, the truth shown within "
                f"{self.worst_truth_s:.1f} s at worst"
                + (f" by status, {self.worst_console_s:.1f} s by the console"
                   if self.worst_console_s else ""))


def chaos_recipe(folder: Path, slug: str = "demo-chaos") -> Path:
    """demo-tp4, booting at once, ticking every ``TICK_S``, with a secret in its environment and
    a watchdog whose budget the soak cannot spend."""
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    text = text.replace('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0"')
    text = text.replace('SPARKTUI_DEMO_TICK = "1"\n',
                        f'SPARKTUI_DEMO_TICK = "{TICK_S}"\nHF_TOKEN = "{SECRET}"\n')
    text += f'\n[restart]\npolicy = "group"\nmax = {BUDGET}\nwindow = "{WINDOW}"\n'
    recipe = folder / slug
    recipe.mkdir(parents=True, exist_ok=True)
    (recipe / "recipe.toml").write_text(text)
    return recipe


class Watch:
    """``sparktui watch RECIPE`` in its own process, its stderr kept across restarts."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], out: Path) -> None:
        self.argv, self.env, self.out = list(argv), env, out
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 60) -> None:
        """Started and watching (said so on stderr); a watch that ends instead is retried
        (a node may still be coming back) until ``timeout``."""
        end = time.monotonic() + timeout
        while True:
            with self.out.open("ab") as err:
                mark = err.tell()
                err.write(f"=== watch started ({self.starts})\n".encode())
                self.starts += 1
                self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=err)
            while b"watching " not in self.out.read_bytes()[mark:]:
                if self.proc.poll() is not None:
                    break
                if time.monotonic() > end:
                    raise Violation(f"the watch did not start within {timeout:.0f} s:\n"
                                    f"{self.out.read_text(errors='replace')[-2000:]}")
                time.sleep(0.1)
            else:
                return
            if time.monotonic() > end:
                raise Violation(f"the watch kept ending:\n{self.out.read_text(errors='replace')[-2000:]}")
            time.sleep(1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise Violation("the watch did not end within 20 s of SIGTERM") from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Soak:
    def __init__(self, testbed: Any, workdir: Path, seed: int, *, faults: int = 40,
                 seconds: float = 220, kinds: Sequence[str] | None = None, long: bool = False,
                 watch_prefix: Sequence[str] = (), log: Callable[[str], None] | None = None,
                 check_odds: float = 0.5, follower: str = "watch", runtime: str = "ssh") -> None:
        """``check_odds``: how often a fault is followed by the checkers at once (otherwise the
        next one lands on its aftermath); always at the end. ``follower``: ``watch``, or
        ``console``: the real console follows the run (``console_probe``), and each check also
        waits for its ranks table to show Docker's truth (the worst time reported).
        ``runtime``: ``ssh`` (the cluster file's nodes over SSH) or ``slurm`` (the same nodes
        as a Slurm partition: one allocation, each rank a step; ``faults.SLURM_TABLE``)."""
        self.testbed, self.workdir, self.seed = testbed, workdir, seed
        self.max_faults, self.max_seconds, self.long = faults, seconds, long
        self.check_odds = check_odds
        self.runtime = runtime
        if runtime == "slurm":
            if testbed.slurm is None:
                raise ValueError("the test cluster has no Slurm")
            self.cluster_file = str(testbed.slurm.cluster_file)
        else:
            self.cluster_file = str(testbed.cluster_file)
        whole = table.SLURM_TABLE if runtime == "slurm" else table.TABLE
        self.kinds = [table.BY_KIND[k] for k in kinds] if kinds else list(whole)
        self.rnd = random.Random(seed)
        self.world = WORLD
        self.recipe = chaos_recipe(workdir / "recipes",
                                   "demo-chaos-slurm" if runtime == "slurm" else "demo-chaos")
        self.slug = self.recipe.name
        self.state_top = workdir / "state"  # the run's files' filesystem: a tmpfs of its own
        self.env = state_env(self.state_top)
        self.state = Path(self.env["XDG_STATE_HOME"]) / "sparktui"
        self.truth = Docker.of(testbed, self.slug)
        self.recorder = Recorder(self.truth)
        self.shown = workdir / "console.json"  # what the console shows (``console_probe``)
        self.watch_prefix = list(watch_prefix)
        self.follow_with(follower)
        self.outputs: list[str] = []
        self.report = Report(seed)
        self.t0 = time.monotonic()
        self.log = log or (lambda _m: None)
        self.run_id: str | None = None
        self.mounted = False

    def follow_with(self, follower: str) -> None:
        """The follower the faults hit from now on (``watch`` or ``console``); the one before
        must be stopped or killed first. Both say what they do in ``watch.err``."""
        self.follower = follower
        if follower == "console":
            argv = [sys.executable, "-m", "tests.chaos.console_probe", str(self.recipe.parent),
                    self.slug, self.cluster_file, str(self.state), str(self.shown)]
        else:
            argv = [*(self.watch_prefix or [sys.executable, "-m", "sparktui"]), "watch",
                    str(self.recipe), "--cluster", self.cluster_file]
        self.watch = Watch(argv, self.env, self.workdir / "watch.err")

    # -- helpers ---------------------------------------------------------------------------
    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def cli(self, *words: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "sparktui", words[0], str(self.recipe), "--cluster",
                self.cluster_file, *words[1:]]
        res = subprocess.run(argv, cwd=ROOT, env=self.env, capture_output=True, text=True,
                             timeout=timeout)
        self.outputs.append(f"$ sparktui {' '.join(words)}\n{res.stdout}{res.stderr}")
        return res

    def said(self, res: subprocess.CompletedProcess[str]) -> None:
        self.log(f"  {res.args[3] if len(res.args) > 3 else ''} exit {res.returncode}")

    def fail(self, what: str) -> None:
        seq = "\n".join(f"  {f}" for f in self.report.faults) or "  (none yet)"
        raise Violation(f"chaos soak seed {self.seed}: {what}\nfaults so far:\n{seq}\n"
                        f"(again: python -m tests.chaos --seeds {self.seed} --faults "
                        f"{self.max_faults}{' --long' if self.long else ''}"
                        f"{' --slurm' if self.runtime == 'slurm' else ''})")

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    # -- the soak --------------------------------------------------------------------------
    def run(self) -> Report:
        self.t0 = time.monotonic()
        try:
            self.setup()
            self.strike(self.max_faults, self.max_seconds)
            self.check()
            self.finish()
        except BaseException:
            self.abort()
            raise
        finally:
            self.close()
        self.report.seconds = self.elapsed()
        return self.report

    def strike(self, count: int, until: float) -> list[Injected]:
        """Up to ``count`` faults of the seed, until ``until`` seconds into the soak, each
        checked after at the seed's odds (else the next lands on its aftermath)."""
        first = len(self.report.faults)
        while len(self.report.faults) - first < count and self.elapsed() < until:
            self.one_fault()
            if self.rnd.random() < self.check_odds:
                self.check()
            else:
                self.sleep(self.rnd.uniform(0, 1.5))
        return self.report.faults[first:]

    def abort(self) -> None:
        """After a violation: every fault mended, the group down; the files kept for a look."""
        self.watch.kill()
        for said in tbf.mend_all(self.testbed):
            self.log(f"mended: {said}")
        if self.runtime == "slurm":
            for node in self.testbed.nodes:
                table.resume(self, node.name)
        self.cli("down")
        if self.mounted:
            shutil.copytree(self.state_top, self.workdir / "state-kept", dirs_exist_ok=True)

    def close(self) -> None:
        self.recorder.stop()
        self.watch.kill()
        self.truth.close()
        if self.mounted:
            self.mounted = False
            subprocess.run(["umount", "-l", str(self.state_top)], check=False)

    def setup(self) -> None:
        self.state_top.mkdir(parents=True, exist_ok=True)
        if table.DISK_FILL in self.kinds:
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STATE_MIB}m,mode=0700", "chaos",
                            str(self.state_top)], check=True, capture_output=True)
            self.mounted = True
        self.cli("down")  # what an earlier soak of this recipe left (its state folder aside)
        res = self.cli("up", "--wait")
        if res.returncode != 0:
            self.fail(f"up --wait: exit {res.returncode}: {res.stderr[-2000:]}")
        st = self.status()
        self.run_id = st["run"]
        self.recorder.start()
        self.watch.start()
        self.log(f"seed {self.seed}: run {self.run_id} up, watch started")

    def one_fault(self) -> None:
        fault = self.rnd.choice(self.kinds)
        hold = fault.hold(self.rnd, self.long)
        at = self.elapsed()
        target = table.inject(self, fault, self.rnd, hold)
        self.report.faults.append(Injected(round(at, 1), fault.kind, target, hold))
        self.log(f"  {self.report.faults[-1]}")
        if not self.watch.alive():  # a fault's aftermath took it (never one of ours)
            self.fail(f"the watch ended by itself:\n{self.watch.out.read_text(errors='replace')[-3000:]}")

    def status(self) -> dict[str, Any]:
        res = self.cli("status", "--json", timeout=60)
        if res.returncode != 0:
            self.fail(f"status --json: exit {res.returncode}: {res.stderr[-2000:]}")
        try:
            return json.loads(res.stdout)  # type: ignore[no-any-return]
        except ValueError:
            self.fail(f"status --json printed no JSON: {res.stdout[-2000:]}")
            raise

    def disagreement(self, st: dict[str, Any]) -> str | None:
        """Where ``status --json`` and Docker differ now; None when they agree."""
        return disagree(st["ranks"], *self.truth.all())

    def check(self) -> None:
        """The states agree with Docker within the bound, then every rank's lines. A group
        that fell after ready is the watchdog's to bring back; one that fell while booting is
        not (by design: a crash loop is not retried), and the soak restarts it as an operator
        would."""
        self.report.checks += 1
        start = time.monotonic()
        if self.follower == "console":  # first: its figure is its own, not status's pace
            self.console_agrees(start)
        settled_at: float | None = None
        while True:
            st = self.status()
            said = self.disagreement(st)
            states = [r["state"] for r in st["ranks"]]
            if said is None and states == ["ready"] * self.world:
                break
            waited = time.monotonic() - start
            owed = self.watchdog_owes()
            if said is None and not owed and "failed" in states:
                # fell while booting (a peer may wait at the rendezvous until its boot
                # timeout): the soak's to mend, as an operator would
                settled_at = settled_at or time.monotonic()
                if time.monotonic() - settled_at > 3:
                    self.log(f"  fell while booting ({states}): restarted by hand")
                    self.by_hand()
                    start, settled_at = time.monotonic(), None
                    continue
            else:
                settled_at = None
            if waited > TRUTH_BOUND_S:
                if said is not None:
                    self.fail(f"sparktui's states disagree with Docker {TRUTH_BOUND_S:.0f} s "
                              f"after the fault: {said}\n{json.dumps(st['ranks'])}")
                self.fail(f"the group is not back {TRUTH_BOUND_S:.0f} s after the fault "
                          f"({states}){'; it fell after ready: the watchdog owes a restart' if owed else ''}"
                          f"\n{json.dumps(st['ranks'])}")
            time.sleep(1.0)  # a status is a second of a core here: the soak's lane shares two
        took = time.monotonic() - start
        self.report.worst_truth_s = max(self.report.worst_truth_s, took)
        self.check_lines()
        self.log(f"  checked: the truth shown after {took:.1f} s, the lines after "
                 f"{time.monotonic() - start - took:.1f} s more")

    def console_agrees(self, since: float) -> None:
        """The console's ranks table shows what Docker runs, every rank ready, within the bound
        of ``since`` (the check's start, right after the fault)."""
        said: str | None = "nothing shown yet"
        while time.monotonic() - since <= TRUTH_BOUND_S:
            try:
                shown = json.loads(self.shown.read_text())
            except (OSError, ValueError):
                shown = None
            if shown is not None and time.time() - shown["at"] < 2:
                rows = shown["ranks"]
                said = disagree(rows, *self.truth.all())
                states = [r["state"] for r in rows]
                booting_fall = "failed" in states and not self.watchdog_owes()  # the soak's
                if said is None and states != ["ready"] * self.world and not booting_fall:
                    said = f"not every rank ready: {states}"
                if said is None:
                    took = time.monotonic() - since
                    self.report.worst_console_s = max(self.report.worst_console_s, took)
                    return
            elif shown is not None:
                said = "the console wrote nothing for 2 s"
            time.sleep(0.2)
        self.fail(f"the console does not show Docker's truth {TRUTH_BOUND_S:.0f} s after the "
                  f"fault: {said}")

    def watchdog_owes(self) -> bool:
        """Whether the run's events say the group was ready since its last restart (a rank
        lost now is the watchdog's to restart)."""
        assert self.run_id is not None
        events = self.events()
        ready = max((i for i, e in enumerate(events) if e.get("kind") == "ready"), default=-1)
        restart = max((i for i, e in enumerate(events)
                       if e.get("kind") == "restart" and e.get("group")), default=-1)
        return ready > restart

    def events(self) -> list[dict[str, Any]]:
        assert self.run_id is not None
        out = []
        for line in (self.state / "runs" / self.run_id / "events.jsonl").read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                break
        return out

    def by_hand(self) -> None:
        self.watch.kill()
        res = self.cli("restart", "--group", "--wait")
        if res.returncode != 0 and "nothing of this recipe has a container of yours" in res.stderr:
            # the watch was killed in its own group restart, between the old containers' end
            # and the new ones (the group judged fallen while booting was its retry): there is
            # nothing to restart, and the next watch finishes the restart cut short
            self.log("  nothing to restart by hand (a group restart cut short): the watch again")
        elif res.returncode != 0:
            self.fail(f"restart --group by hand: exit {res.returncode}: {res.stderr[-2000:]}")
        self.watch.start()

    def check_lines(self, settle_s: float = 10.0) -> None:
        assert self.run_id is not None
        run_dir = self.state / "runs" / self.run_id
        ranks, silent = self.truth.all()
        if silent:
            self.fail(f"Docker on {', '.join(silent)} does not answer at a check")
        checked = 0
        for rank in range(self.world):
            path = run_dir / f"r{rank}.log"
            running = [c for c in ranks.get(rank, []) if c.running]
            current = self.truth.ticks(running[0]) if running else None
            want = max(current or [0])
            end = time.monotonic() + settle_s
            while True:  # the watch writes what Docker has within a moment
                segs = segments(path)
                if max(segs[-1].ticks, default=0) >= want or time.monotonic() > end:
                    break
                time.sleep(0.2)
            engine_killed = any(f.kind == "dockerd-kill" and f.target == f"node{rank}"
                                for f in self.report.faults)
            for i, seg in enumerate(segs):
                who = f"container {seg.container}" if seg.container else "its current container"
                if seg.container is None and current is not None:
                    # what Docker holds of it, exactly (a line its engine lost with a killed
                    # dockerd is not sparktui's to copy)
                    broke = (None if seg.ticks[:len(current)] == current else
                             f"its ticks {_span(seg.ticks)} are not Docker's {_span(current)}: "
                             "lines lost, doubled or out of order")
                elif engine_killed:  # removed: in order, once; a gap may be Docker's own loss
                    broke = next((f"tick {b} after {a} (written twice or out of order)"
                                  for a, b in itertools.pairwise(seg.ticks) if b <= a), None)
                else:
                    broke = first_break(seg.ticks)
                if broke:
                    self.fail(f"rank {rank}, segment {i} ({who}) of {path.name}: {broke}")
                if seg.container is not None:
                    seen = self.recorder.seen_of(seg.container)
                    if max(seg.ticks, default=0) < seen:
                        self.fail(f"rank {rank}, segment {i} ({who}): the file ends at tick "
                                  f"{max(seg.ticks, default=0)}, the container wrote {seen}")
            if max(segs[-1].ticks, default=0) < want:
                self.fail(f"rank {rank}: its file holds ticks to {max(segs[-1].ticks, default=0)} "
                          f"{settle_s:.0f} s after Docker held {want}")
            checked += sum(len(s.ticks) for s in segs)
        self.report.lines_checked = checked  # the last check's: every line of the run

    def left_behind(self) -> tuple[list[Any], list[str], str]:
        """The run's containers on every node, the nodes whose engine did not answer, and on
        Slurm what ``squeue`` still lists of the recipe's job (its epilog removes the
        containers a moment after the job ends)."""
        try:
            ranks, silent = self.truth.all()
        except DOCKER_ERRORS as exc:  # pragma: no cover - said as a violation
            self.fail(f"Docker after down: {exc}")
        jobs = ""
        if self.runtime == "slurm":
            res = tbm.slurm_command(self.testbed.state_dir, [
                "squeue", "--noheader", f"--name={job_name(self.slug)}", "--format=%i %T"])
            jobs = res.stdout.strip() if res.returncode == 0 else f"squeue: {res.stderr.strip()}"
        return [c for cs in ranks.values() for c in cs], silent, jobs

    def finish(self) -> None:
        """The watchdog within its budget; ``down`` leaves nothing; no traceback; no secret."""
        assert self.run_id is not None
        code = self.watch.stop()
        if code not in (0, None):
            self.fail(f"the watch ended with {code} on SIGTERM")
        events = self.events()
        said = [e for e in events if e.get("kind") == "watchdog"]
        times = sorted(float(e["at"]) for e in said if e.get("action") == "restart")
        self.report.restarts = len(times)
        # the budget is BUDGET in any WINDOW_S: the most in one window, and said when spent
        most = max((bisect.bisect_right(times, t + WINDOW_S) - i for i, t in enumerate(times)),
                   default=0)
        if most > BUDGET:
            self.fail(f"the watchdog restarted {most} times within {WINDOW}, budget {BUDGET}")
        spent = any(e.get("action") == "budget-spent" for e in said)
        if most == BUDGET and not spent and self.watchdog_owes():
            self.fail(f"the watchdog spent its budget ({BUDGET} in {WINDOW}) and did not say so")
        res = self.cli("down")
        if res.returncode != 0:
            self.fail(f"down: exit {res.returncode}: {res.stderr[-2000:]}")
        end = time.monotonic() + (DOWN_SLURM_S if self.runtime == "slurm" else 0)
        while True:
            left, silent, jobs = self.left_behind()
            if not (left or silent or jobs) or time.monotonic() > end:
                break
            time.sleep(0.5)
        if jobs:
            self.fail(f"after down: Slurm still lists the run's job: {jobs}")
        if silent or left:
            self.fail(f"after down: {len(left)} containers left ({[short_id(c.id) for c in left]}), "
                      f"silent engines {silent}")
        stray = [p for p in Path("/proc").glob("[0-9]*")
                 if _cmdline_has(p, str(self.recipe)) and int(p.name) != os.getpid()]
        if stray:
            self.fail(f"after down: sparktui processes left: {[p.name for p in stray]}")
        texts = [self.watch.out.read_text(errors="replace"), *self.outputs]
        for text in texts:
            if TRACEBACK in text:
                self.fail(f"a traceback in an output:\n{text[-3000:]}")
        for path in self.workdir.rglob("*"):
            if path.is_file() and path.name != "recipe.toml" and SECRET.encode() in path.read_bytes():
                self.fail(f"the secret is in {path}")
        for text in texts:
            if SECRET in text:
                self.fail("the secret is in an output")


def _span(ticks: list[int]) -> str:
    gaps = [(a, b) for a, b in itertools.pairwise(ticks) if b != a + 1]
    return (f"{ticks[0] if ticks else '-'}..{ticks[-1] if ticks else '-'}"
            + (f" (breaks at {gaps[:3]})" if gaps else ""))


def disagree(rows: Sequence[dict[str, Any]], ranks: dict[int, list[Any]],
             silent: Sequence[str]) -> str | None:
    """Where sparktui's rows (``rank``, ``state``, ``container_id``: from ``status --json`` or
    the console) and Docker's containers differ; None when they agree: each rank's running
    container is the one sparktui names, in a running state; a rank with none running is in
    no running state."""
    if silent:
        return f"Docker on {', '.join(silent)} does not answer"
    for row in rows:
        rank = row["rank"]
        running = [c for c in ranks.get(rank, []) if c.running]
        if len(running) > 1:
            return f"rank {rank}: {len(running)} containers running"
        if running:
            named = row.get("container_id") or ""
            if not named or not names(running[0].id, named):
                return f"rank {rank}: Docker runs {running[0].id[:12]}, sparktui names {named or None}"
            if row["state"] not in RUNNING_STATES:
                return f"rank {rank}: Docker runs {running[0].id[:12]}, sparktui says {row['state']}"
        elif row["state"] in RUNNING_STATES:
            return f"rank {rank}: no container runs, sparktui says {row['state']}"
    return None


RUNNING_STATES = ("booting", "ready", "wedged")


def _cmdline_has(proc: Path, needle: str) -> bool:
    try:
        return needle.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False
