"""How a rank ends: the first fatal error's code, or exit 0 on SIGTERM/SIGINT, decided in the
main thread while the boot, rendezvous and HTTP threads run."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from .lines import EXIT_INTERNAL, EXIT_OK, SHUTDOWN_LINE, fatal
from .log import Log


class Life:
    """The main thread sleeps on a pipe that a fatal error or a signal writes to; the first
    fatal error wins, and a signal exits 0 unless one is being logged."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._exit_lock = threading.Lock()
        self._exit_claimed = False
        self._exit_code: int | None = None
        self._claimed_code = EXIT_OK
        self._signal: int | None = None

    @property
    def exiting(self) -> bool:
        return self._exit_claimed

    def fatal(self, lines: Sequence[str], code: int) -> None:
        """Log the fatal lines and make the process exit with ``code`` (first caller wins)."""
        with self._exit_lock:
            if self._exit_claimed:
                return
            self._exit_claimed = True
            self._claimed_code = code
        self.log.lines([part for line in lines for part in line.split("\n")])
        self._exit_code = code
        self._wake()

    def thread(self, target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
        """Start a daemon thread ``demo-<name>``."""
        thread = threading.Thread(target=target, args=args, name=f"demo-{name}", daemon=True)
        thread.start()
        return thread

    def watch(self) -> None:
        """From now on a signal wakes the main thread and a crashed thread is fatal."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        threading.excepthook = self._thread_crashed

    def wait(self, say_bye: Callable[[], None]) -> int:
        """Wait (in the main thread) for a fatal error or a signal, then exit the process."""
        while True:
            try:
                select.select([self._wake_r], [], [])
                os.read(self._wake_r, 512)
            except InterruptedError:  # pragma: no cover - PEP 475 retries select itself
                pass
            if self._exit_code is not None:
                self._finish(self._exit_code)
            if self._signal is not None:
                with self._exit_lock:
                    if self._exit_claimed:
                        # A fatal error is being logged and wakes us when done; should its write
                        # block on a full pipe, still exit (with its code) soon.
                        self.thread(_exit_soon, "exit", self._claimed_code, 0.8)
                        self._signal = None
                        continue
                    self._exit_claimed = True
                # If stdout is a pipe nobody drains, logging would block: exit 0 regardless, soon.
                self.thread(_exit_soon, "exit", EXIT_OK, 0.8)
                name = signal.Signals(self._signal).name.lower()
                self.log(SHUTDOWN_LINE.format(signame=name))
                say_bye()
                self._finish(EXIT_OK)

    def _thread_crashed(self, args: threading.ExceptHookArgs) -> None:
        """A bug in a thread is fatal, with its traceback logged."""
        import traceback

        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        name = args.thread.name if args.thread else "?"
        self.fatal([f"DEMO internal error in thread {name}:", *text.rstrip().split("\n"),
                    fatal("internal error", EXIT_INTERNAL)], EXIT_INTERNAL)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signal = signum
        self._wake()

    def _finish(self, code: int) -> None:
        self.log.close()
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stdout.flush()
        os._exit(code)


def _exit_soon(code: int, delay: float) -> None:
    time.sleep(delay)
    os._exit(code)
