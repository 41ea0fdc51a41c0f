"""One demo rank: its boot thread, its group, its HTTP server; the main thread waits to exit.

What differs between the engines it imitates (the boot log, the dump, the prefix, when HTTP
serves) is the ``Personality`` it is given (``sglang.PERSONALITY``, ``vllm.PERSONALITY``); the rest
is here.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from .chat import Chat
from .config import Config
from .http import Server
from .life import Life
from .lines import ENGINE_NAME, EXIT_SIMULATED, EXIT_USAGE, NCCL_INIT_LINE, EngineLines, fatal
from .load import Load, Reading
from .log import Log, LogStyle
from .memory import first_time, hold
from .rendezvous import Group
from .traffic import flood, tick

SHARDS = 4
STALL_PERIOD = 2.0


class Personality(Protocol):
    """One engine's ways: its lines, its log prefix, its banner and its boot sequence."""

    name: str
    lines: EngineLines
    serves_while_booting: bool  # HTTP serves from the start (SGLang) or from ready (vLLM)
    buckets: dict[str, tuple[float, ...]]  # its latency histograms' bounds (``load.Load``)

    def log_style(self, rank: int) -> LogStyle:
        """The prefix of this rank's lines and of its HTTP server's."""
        ...

    def banner(self, cfg: Config) -> list[str]:
        """The engine's lines of the banner (its version, its dump of the arguments)."""
        ...

    def boot(self, rank: Rank) -> None:
        """The boot sequence, in the boot thread: rendezvous, load, become ready."""
        ...

    def metrics(self, cfg: Config, reading: Reading) -> str | None:
        """Rank 0's ``/metrics`` body in the engine's families (None: it serves none)."""
        ...


class Rank:
    """One rank of the demo group, imitating ``engine``."""

    def __init__(self, cfg: Config, engine: Personality, log: Log | None = None) -> None:
        self.cfg = cfg
        self.rank = cfg.node_rank
        self.engine = engine
        self.log = log if log is not None else Log(engine.log_style(cfg.node_rank))
        self.life = Life(self.log)
        self.group = Group(cfg, self.log, self.life)
        self.load = Load(cfg.max_running, engine.buckets)
        self.chat = Chat(cfg, self.log, self.group.step, self.load)
        self.ready = threading.Event()
        self._http: Server | None = None

    def run(self) -> int:
        """Boot in the background and wait (in the main thread) for a signal or a fatal error."""
        self.life.watch()
        self._log_banner()
        if self.cfg.headless or self._open_http():  # a headless vLLM worker opens no port
            self.life.thread(self.engine.boot, "boot", self)
        return self.life.wait(self.group.say_bye)

    def _open_http(self) -> bool:
        """Bind the API port before booting, so a port in use fails at once. SGLang serves
        ``/health`` (503) while booting; vLLM's API server holds its bound socket and serves only
        from "Application startup complete." on (a request before that waits)."""
        try:
            self._http = Server(self)
        except OSError as exc:
            self.life.fatal([f"ERROR: [Errno {exc.errno}] error while attempting to bind on address "
                             f"({self.cfg.host!r}, {self.cfg.port}): {exc.strerror}",
                             fatal(f"cannot serve HTTP on {self.cfg.host}:{self.cfg.port}", EXIT_USAGE)],
                            EXIT_USAGE)
            return False
        if self.engine.serves_while_booting:
            self.serve_http()
        return True

    def metrics(self) -> str | None:
        """``/metrics``: rank 0's, in its engine's format; None on a worker (SGLang's serves
        only ``/health``) or where the engine serves none."""
        if self.rank != 0:
            return None
        return self.engine.metrics(self.cfg, self.load.reading())

    def serve_http(self) -> None:
        """Start answering on the bound port."""
        assert self._http is not None
        self.life.thread(self._http.serve_forever, "http", 1.0)

    def _log_banner(self) -> None:
        cfg = self.cfg
        lines = [f"{ENGINE_NAME} (not a real model) rank {cfg.node_rank}/{cfg.nnodes}",
                 *self.engine.banner(cfg)]
        flags = [arg.split("=", 1)[0] for arg in cfg.ignored if arg.startswith("-")]
        if cfg.ignored:
            lines.append(f"DEMO ignoring {len(flags)} flag(s) the demo engine does not implement: "
                         + (" ".join(flags) or " ".join(cfg.ignored)))
        if cfg.fail_rank is not None and not 0 <= cfg.fail_rank < cfg.nnodes:
            lines.append(f"DEMO warning: --demo-fail-rank {cfg.fail_rank} is not a rank of this "
                         f"{cfg.nnodes}-rank group; nothing will fail")
        self.log.lines(lines)

    # -- what both boot sequences do ------------------------------------------------------------
    def fails_here(self) -> bool:
        return self.cfg.fail_rank == self.rank

    def load_shards(self) -> bool:
        """The checkpoint shards over 80% of the boot time; False when this rank fails half way."""
        cfg, log = self.cfg, self.log
        if cfg.alloc and cfg.alloc_rank in (None, self.rank) and first_time(cfg.alloc_once, log):
            self.life.thread(hold, "alloc", log, self.life, cfg.alloc, cfg.alloc_step, cfg.alloc_every)
        step = cfg.boot_seconds * 0.8 / SHARDS
        log(f"Loading safetensors checkpoint shards:   0% Completed | 0/{SHARDS} [00:00<?, ?it/s]")
        for shard in range(1, SHARDS + 1):
            time.sleep(step)
            done = step * shard
            log(f"Loading safetensors checkpoint shards: {100 * shard // SHARDS:3d}% Completed | "
                f"{shard}/{SHARDS} [{_mmss(done)}<{_mmss(step * (SHARDS - shard))}, {step:5.2f}s/it]")
            if shard == SHARDS // 2 and self.fails_here() and cfg.fail_after is None:
                why = f"--demo-fail-rank {self.rank} during weight loading"
                self.life.fatal(self.engine.lines.crash(self.rank, False, why), EXIT_SIMULATED)
                return False
        return True

    def nccl_line(self) -> bool:
        """``--demo-hang-rank``: every rank prints the NCCL line; that rank then goes silent
        (as a rank stuck in its first collective does) until it is stopped. False: it hangs."""
        cfg = self.cfg
        if cfg.hang_rank is None:
            return True
        self.log(NCCL_INIT_LINE.format(rank=self.rank, world=cfg.nnodes))
        if cfg.hang_rank != self.rank:
            return True
        while not self.life.exiting:
            time.sleep(0.2)
        return False

    def stall(self, started: float) -> None:
        """``--demo-stall``: never ready, a waiting line every 2 s."""
        while not self.life.exiting:
            self.log(f"Waiting for cuda graph capture to finish... ({ENGINE_NAME} stalled on purpose by "
                     f"--demo-stall; {time.monotonic() - started:.0f} s since boot)")
            time.sleep(STALL_PERIOD)

    def worker_ready(self) -> None:
        """A worker booted: rank 0 hears of it, ``/health`` answers 200."""
        self.group.report_ready()
        self.ready.set()

    def after_ready(self) -> None:
        """Ticks, flood, and the crash of ``--demo-fail-after``."""
        cfg = self.cfg
        if cfg.tick > 0:
            self.life.thread(tick, "tick", self.log, self.life, cfg.tick)
        if cfg.flood > 0:
            self.life.thread(flood, "flood", self.log, self.life, cfg.flood)
        if self.fails_here() and cfg.fail_after is not None:
            time.sleep(cfg.fail_after)
            why = f"--demo-fail-rank {self.rank} --demo-fail-after {cfg.fail_after:g}"
            self.life.fatal(self.engine.lines.crash(self.rank, True, why), EXIT_SIMULATED)


def _mmss(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}"
