"""Supervisor of one local rank: what containerd-shim is to a container, for a plain process.

Run as ``python -m sparktui.agents.local_shim [--foreground] <state>/<id>/meta.json``. Standard
library only, so it never depends on anything but the interpreter that started it.

Why a separate process: the rank must outlive sparktui (as a container outlives the docker
client), yet every line it prints must land on disk with a timestamp, and its exit code must be
recorded. The shim detaches (double fork, own session), starts the rank in its own process group,
and writes into the rank's state directory:

- ``pids.json``: the shim's and the rank's pids with their start times from ``/proc/<pid>/stat``,
  so a later reader can tell a live process from an unrelated one that reused the pid;
- ``output.log``: the rank's merged stdout+stderr, one ``<RFC 3339 UTC> <text>`` line per line;
- ``exit.json``: ``exit_code`` (docker's convention: ``128 + N`` when signal N killed the rank,
  127 when the program could not be started), ``signal`` and ``finished_at``; written atomically
  last, so its presence means the log is complete.

Before ``pids.json`` exists the rank counts as "created"; the parent of the double fork exits 0
only once it does, so ``LocalRuntime.run`` knows the rank is started (or recorded as failed).
SIGTERM, SIGINT and SIGHUP sent to the shim are forwarded to the rank's process group. When the
rank's main process exits, whatever is left in its group is killed, as docker does with a
container whose init exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import IO, Any

# A line longer than this is cut into pieces: a progress bar redrawn with "\r" forever must not
# grow the shim's memory without bound. Readers' chunks (64 KiB) always hold one whole piece.
# The Docker log pump cuts its lines with the same ``LineCutter``.
MAX_LINE_BYTES = 32 * 1024
CONTINUED = "\u21aa "
"""The start of every piece of a cut line but its first (``↪ ``): dropping it from those
pieces and joining them gives the line back, byte for byte."""
# After the rank exits, how long descendants that escaped its group may keep the pipe open.
DRAIN_AFTER_EXIT_S = 2.0
MASK = b"********"
MIN_REDACT = 4  # as core.redact: shorter values are masked where they stand, not searched for
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PYTHON_NAMES = ("python", "python3")

META = "meta.json"
PIDS = "pids.json"
OUTPUT = "output.log"
EXIT = "exit.json"
SHIM_LOG = "shim.log"
SECRET_ARGS_ENV = "SPARKTUI_SECRET_ARGS"
BOOTSTRAP = Path(__file__).with_name("secret_argv.py")


def utc_now() -> str:
    """RFC 3339 UTC with nine fraction digits (the last three zero), the timestamp of every log
    line: the width docker's timestamps have before it trims zeros, and the one the console keeps
    (its lines then share this string instead of each holding a padded copy)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def proc_stat(pid: int) -> tuple[str, int] | None:
    """``(state, starttime)`` from ``/proc/<pid>/stat``, or None when there is no such process.

    ``starttime`` (clock ticks since boot) tells a process from a later one that reused its pid.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = raw.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def proc_start(pid: int) -> int | None:
    stat = proc_stat(pid)
    return None if stat is None else stat[1]


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Readers see the old file or the new one, never half of it. Created 0600 without
    following a link: ``meta.json`` holds the rank's environment, secrets included."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover of a dead process with our pid
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _open_output(path: Path) -> IO[bytes]:
    """``output.log`` for appending, created 0600 (what the rank prints is its owner's)."""
    return open(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600), "ab")


def exit_code_of(returncode: int) -> tuple[int, int | None]:
    """Popen's ``-N`` for "killed by signal N" becomes docker's ``128 + N``."""
    if returncode < 0:
        return 128 - returncode, -returncode
    return returncode, None


def project_root() -> Path:
    """The folder holding the ``sparktui`` package, so ranks can ``import sparktui``."""
    return Path(__file__).resolve().parent.parent.parent


def with_pythonpath(env: dict[str, str], root: Path) -> dict[str, str]:
    """``env`` with ``root`` first on PYTHONPATH (once)."""
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(root)]
    return {**env, "PYTHONPATH": os.pathsep.join([str(root), *parts])}


def rank_command(meta: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of the rank described by ``meta``.

    ``python``/``python3`` become this interpreter: the venv that runs sparktui, where the
    rank's own code (and sparktui) is importable. Secret flag values (``meta["secret_args"]``:
    ``{index: token}``, masked in ``meta["argv"]``) travel in the environment only: every user
    can read a process's command line (``ps``), only its owner its environment. A Python rank
    starts through ``secret_argv.py``, which puts them back into ``sys.argv``; any other
    program cannot be given them that way, and is refused with a sentence (an ``OSError``).
    """
    argv = [str(a) for a in meta["argv"]]
    if argv and argv[0] in PYTHON_NAMES:
        argv[0] = sys.executable
    env = {**os.environ, **{str(k): str(v) for k, v in meta.get("env", {}).items()}}
    secret = {int(i): str(t) for i, t in (meta.get("secret_args") or {}).items()}
    if secret:
        argv, start = _through_bootstrap(argv)
        env[SECRET_ARGS_ENV] = json.dumps({str(i - start): t for i, t in secret.items()})
    return argv, with_pythonpath(env, project_root())


def _through_bootstrap(argv: list[str]) -> tuple[list[str], int]:
    """``argv`` run through ``secret_argv.py``, and the index in ``argv`` of the bootstrap's
    first word (``-m``/``-c``/the script)."""
    program = argv[0] if argv else ""
    if os.path.basename(program).startswith("python"):
        start = 1  # the interpreter's own options stay before the bootstrap
        while start < len(argv) and argv[start].startswith("-") and argv[start] != "-" \
                and argv[start][:2] not in ("-m", "-c"):
            start += 2 if argv[start] in ("-W", "-X") else 1
        return [*argv[:start], str(BOOTSTRAP), *argv[start:]], start
    path = shutil.which(program) or program
    interpreter = _python_shebang(path)
    if interpreter is None:
        raise OSError(f"{program}: a secret flag value reaches a local rank through its "
                      "environment only, which sparktui can do for a Python program (python, "
                      "python3 or a Python script); put the secret in [env] instead")
    return [*interpreter, str(BOOTSTRAP), path, *argv[1:]], 0


class LineCutter:
    """Output in chunks of any size -> its lines, each at most ``MAX_LINE_BYTES`` bytes: a
    longer line is cut into pieces (at a UTF-8 character's start, so none is split), each
    piece after the first marked ``CONTINUED``. Holds at most one piece back, so one line
    without a newline costs a piece of memory, not its length."""

    def __init__(self, cap: int = MAX_LINE_BYTES, whole: Iterable[bytes] = ()) -> None:
        self.cap = cap
        self.pending = bytearray()
        self.continued = False  # ``pending`` carries on a line already cut
        # Values no cut may split (secrets: a piece holding half of one is not masked by a
        # search for it). A piece is cut only once this much more than the cap is held, so
        # a value that straddles the cap is whole in ``pending`` and the cut moves before it.
        self.whole = sorted({v for v in whole if 0 < len(v) < cap}, key=len, reverse=True)
        self.margin = len(self.whole[0]) - 1 if self.whole else 0

    def feed(self, data: bytes) -> list[str]:
        out: list[str] = []
        view = memoryview(data)
        start, size = 0, len(data)
        split = False  # ``_short_lines`` was tried (once: a long line sends the rest below)
        while start < size:
            if not (split or self.pending or self.continued):
                split = True
                start = self._short_lines(out, data, start)
                continue
            stop = min(size, start + self.cap)  # a chunk of any size: a piece at a time
            end = data.find(b"\n", start, stop)
            self.pending += view[start:stop if end < 0 else end]
            self._cut(out, ends=end >= 0)
            start = stop if end < 0 else end + 1
        return out

    def _short_lines(self, out: list[str], data: bytes, start: int) -> int:
        """The whole lines of ``data`` from ``start`` when none is longer than a piece (most
        reads: none is cut), split at once rather than one at a time as ``feed`` does; returns
        where the rest starts."""
        end = data.rfind(b"\n", start)
        if end < 0:
            return start
        block = data[start:end]
        if len(block) > self.cap and max(map(len, block.split(b"\n"))) > self.cap:
            return start
        # decoded whole: a newline byte is never inside a character, nor in what replaces one
        lines = block.decode("utf-8", errors="replace").split("\n")
        if b"\r" in block:  # "\r\n" ends a line as "\n" does (``_cut``)
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        out += lines
        return end + 1

    def close(self) -> list[str]:
        """What is held back, as a last line (output that ended without its newline)."""
        out: list[str] = []
        if self.pending or self.continued:
            self._cut(out, ends=True)
        return out

    def _cut(self, out: list[str], ends: bool) -> None:
        """Pieces off the front of ``pending``; all of it when the line ``ends`` there, else
        whole pieces only while more than a piece is held (a newline may follow)."""
        pending, cap = self.pending, self.cap
        while len(pending) > (cap if ends else cap + self.margin):
            at = cap
            while at > cap - 3 and pending[at] & 0xC0 == 0x80:  # inside a character: back off
                at -= 1
            if pending[at] & 0xC0 == 0x80:
                at = cap  # not UTF-8 anyway: cut at the cap
            if self.whole:
                at = self._before_whole(at)
            self._piece(out, bytes(pending[:at]))
            del pending[:at]
            self.continued = True
        if ends:
            raw = bytes(pending)
            self._piece(out, raw[:-1] if raw.endswith(b"\r") else raw)
            pending.clear()
            self.continued = False

    def _before_whole(self, at: int) -> int:
        """``at``, or the start of a ``whole`` value that would straddle it."""
        moved = True
        while moved:
            moved = False
            for value in self.whole:
                i = self.pending.find(value, max(0, at - len(value) + 1), at + len(value) - 1)
                if 0 < i < at:
                    at, moved = i, True
        return at

    def _piece(self, out: list[str], raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace")
        out.append(CONTINUED + text if self.continued else text)


def _python_shebang(path: str) -> list[str] | None:
    """The interpreter words of a Python script's ``#!`` line (``vllm``, ``sglang``), else None."""
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return None
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    return words if words and os.path.basename(words[-1]).startswith("python") else None


class _LineWriter:
    """Splits raw output into timestamped lines in ``output.log``; holds back a partial line.
    The rank's secret values (``meta.json``'s ``redact``) are masked before anything is written:
    engines print their own arguments at boot, API key included."""

    def __init__(self, out: IO[bytes], secrets: list[str] | None = None) -> None:
        self.out = out
        self.cutter = LineCutter()
        self.secrets = sorted({s.encode("utf-8", "surrogateescape") for s in secrets or ()
                               if len(s) >= MIN_REDACT}, key=len, reverse=True)
        # The end of a read after its last newline, shorter than the longest secret, waits for
        # the next read: a secret split between two reads is whole, and masked, before the
        # cutter sees it (a secret holds no newline, so whole lines are never held back).
        self.keep = len(self.secrets[0]) - 1 if self.secrets else 0
        self.held = b""

    def mask(self, data: bytes) -> bytes:
        for secret in self.secrets:  # one search of the whole read per secret when none is in it
            if secret in data:
                data = data.replace(secret, MASK)
        return data

    def feed(self, data: bytes) -> None:
        if self.secrets:
            data = self.mask(self.held + data)
            cut = max(data.rfind(b"\n") + 1, len(data) - self.keep, 0)
            data, self.held = data[:cut], data[cut:]
        self._write(self.cutter.feed(data))

    def write(self, raw: bytes) -> None:
        self._write(LineCutter().feed(raw + b"\n"))

    def _write(self, lines: list[str]) -> None:
        if lines:  # one read's lines arrived together: one timestamp (one each was 5 us a line)
            now = utc_now()
            self.out.write("".join(f"{now} {text}\n" for text in lines).encode())
        self.out.flush()

    def close(self) -> None:
        if self.held:
            self._write(self.cutter.feed(self.mask(self.held)))
            self.held = b""
        self._write(self.cutter.close())


class Shim:
    """Starts the rank, copies its output, records how it ended."""

    def __init__(self, meta_path: Path) -> None:
        self.dir = meta_path.parent
        self.meta: dict[str, Any] = json.loads(meta_path.read_text(encoding="utf-8"))
        self.child: subprocess.Popen[bytes] | None = None
        self.pending_signal: int | None = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        child = self.child
        if child is None:
            self.pending_signal = signum  # arrived before the rank exists: deliver it on start
            return
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)

    def _pids(self, child_pid: int | None, started_at: str) -> dict[str, Any]:
        me = os.getpid()
        return {
            "shim_pid": me,
            "shim_start": proc_start(me),
            "child_pid": child_pid,
            "child_start": proc_start(child_pid) if child_pid is not None else None,
            "started_at": started_at,
        }

    def start(self) -> bool:
        """Start the rank and write ``pids.json``; on failure record the error as its exit."""
        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, self._on_signal)
        started_at = utc_now()
        argv: list[str] = [str(a) for a in self.meta["argv"]][:1]
        try:
            argv, env = rank_command(self.meta)
            if not argv:
                raise FileNotFoundError("empty command")
            self.child = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=env, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            with _open_output(self.dir / OUTPUT) as out:
                writer = _LineWriter(out)
                writer.write(f"sparktui: cannot start {argv[:1]}: {exc}".encode())
                writer.close()
            write_json_atomic(self.dir / PIDS, self._pids(None, started_at))
            code = 126 if isinstance(exc, PermissionError) else 127
            write_json_atomic(self.dir / EXIT, {"exit_code": code, "signal": None, "finished_at": utc_now()})
            return False
        write_json_atomic(self.dir / PIDS, self._pids(self.child.pid, started_at))
        if self.pending_signal is not None:
            self._on_signal(self.pending_signal, None)
        return True

    def supervise(self) -> int:
        """Copy output until the rank's pipe closes; write ``exit.json``.

        When the rank's main process exits, what is left of its group is killed at once;
        descendants that left the group get ``DRAIN_AFTER_EXIT_S`` to release the pipe.
        """
        child = self.child
        assert child is not None and child.stdout is not None
        fd = child.stdout.fileno()
        with _open_output(self.dir / OUTPUT) as out:
            writer = _LineWriter(out, self.meta.get("redact"))
            drain_deadline: float | None = None
            while True:
                ready, _, _ = select.select([fd], [], [], 0.5)
                if ready:
                    data = os.read(fd, 65536)
                    if not data:
                        break
                    writer.feed(data)
                if drain_deadline is None and _has_exited(child):
                    _kill_group(child)
                    drain_deadline = time.monotonic() + DRAIN_AFTER_EXIT_S
                if drain_deadline is not None and time.monotonic() > drain_deadline:
                    break
            writer.close()
        _wait_exit(child)
        _kill_group(child)
        returncode = child.wait()
        child.stdout.close()
        code, sig = exit_code_of(returncode)
        write_json_atomic(self.dir / EXIT, {"exit_code": code, "signal": sig, "finished_at": utc_now()})
        return 0


# The rank is waited for without being reaped (WNOWAIT) until its group is cleared: the zombie
# keeps its pid, which is the group id, from being reused, so the group kill cannot hit a stranger.


def _has_exited(child: subprocess.Popen[bytes]) -> bool:
    if child.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_exit(child: subprocess.Popen[bytes]) -> None:
    if child.returncode is None:
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    if child.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)


def _detach() -> tuple[int | None, int | None]:
    """Double fork, so the shim is nobody's child but init's and survives the launcher.

    Returns ``(status, None)`` in the launcher's child, which waits for the grandchild's word and
    exits with ``status``; ``(None, ready_fd)`` in the grandchild (own session), which carries on
    and reports on ``ready_fd`` once the rank is started.
    """
    read_end, write_end = os.pipe()  # not inheritable: the rank never holds it
    if os.fork() > 0:
        os.close(write_end)
        message = b""
        while chunk := os.read(read_end, 4096):
            message += chunk
        os.close(read_end)
        if message.startswith(b"ok"):
            return 0, None
        sys.stderr.write("sparktui shim: the supervisor died before starting the rank\n")
        return 1, None
    os.close(read_end)
    with contextlib.suppress(OSError):
        os.setsid()
    return None, write_end


def _report_ready(fd: int | None) -> None:
    if fd is None:
        return
    try:
        os.write(fd, b"ok\n")
    finally:
        os.close(fd)


USAGE = "usage: python -m sparktui.agents.local_shim [--foreground] <meta.json>\n"


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(USAGE)
        return 0
    args = [a for a in argv if a != "--foreground"]
    if len(args) != 1:
        sys.stderr.write(USAGE)
        return 2
    meta_path = Path(args[0]).resolve()
    ready_fd: int | None = None
    if "--foreground" not in argv:
        status, ready_fd = _detach()
        if status is not None:
            return status
    shim = Shim(meta_path)
    started = shim.start()
    _report_ready(ready_fd)
    return shim.supervise() if started else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
