"""The ``Runtime`` of the built-in local cluster: each rank is a local process, not a container.

Ranks must outlive sparktui as containers outlive the docker client, so nothing here holds a rank:
``run`` starts a detached supervisor (``local_shim``) and everything else reads the files it
keeps under ``<state_dir>/<id>/`` (``meta.json``, ``pids.json``, ``output.log``, ``exit.json``;
see ``local_shim``). Any ``LocalRuntime`` on the same ``state_dir``, in any later process, sees
the same ranks.

Exit codes follow docker: ``128 + N`` for a rank killed by signal N (143 after SIGTERM, 137 after
SIGKILL), 127 when the program could not be started. Statuses: ``created`` (supervisor starting),
``running`` (the supervisor or the rank is alive), ``exited`` (``exit.json`` recorded), ``dead``
(both processes vanished without recording an exit: the supervisor was killed, or the machine
rebooted), ``missing`` (no such id).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from sparktui.agents.local_shim import (
    EXIT,
    META,
    OUTPUT,
    PIDS,
    SHIM_LOG,
    proc_stat,
    project_root,
    utc_now,
    with_pythonpath,
    write_json_atomic,
)
from sparktui.backend.runtime import ContainerState, LogChunk, NameTaken
from sparktui.core.names import UnsafeName, child, is_safe
from sparktui.core.private import opener, private_dir, private_mkdir
from sparktui.core.rankspec import ContainerSpec
from sparktui.core.redact import MASK

IMAGE_ID = "local"
ID_PREFIX = "local-"
POLL_S = 0.1
ALIVE_EVERY_S = 1.0
"""How often a log's follower, finding nothing new, asks whether the rank's processes live
(its pids file and ``/proc``). Whether the rank recorded its exit is asked at every poll: the
usual end, found as soon as before; a supervisor gone without recording one (killed) within
a second. At 32 ranks, ten reads of each pids file a second were 4 % of the console's loop."""
CHUNK_BYTES = 64 * 1024
CHUNK_LINES = 2000
SHIM_START_TIMEOUT_S = 30.0
# After SIGKILL, how long the supervisor gets to notice and record the exit itself.
KILL_GRACE_S = 5.0


def pid_alive(pid: int | None, start: int | None) -> bool:
    """Whether ``pid`` is the live process that was recorded with start time ``start``.

    The start time guards against pid reuse: a different process with the same pid (or a
    zombie waiting to be reaped) does not count.
    """
    if pid is None or pid <= 0:
        return False
    stat = proc_stat(pid)
    if stat is None:
        if os.path.exists("/proc/self/stat"):
            return False
        try:  # no procfs: existence is all we can check
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    state, started = stat
    if state in ("Z", "X", "x"):
        return False
    return start is None or started == start


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class LocalRuntime:
    """Ranks as detached local processes, tracked through files in ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)

    def _dir(self, container_id: str) -> Path:
        """The rank's folder; ``UnsafeName`` (a ValueError) for an id that is no safe name or
        whose folder leads outside ``state_dir``."""
        if not container_id.startswith(ID_PREFIX):
            raise UnsafeName(f"local rank id {container_id[:80]!r} does not start with {ID_PREFIX}")
        return child(self.state_dir, container_id, "local rank id")

    def rank_pid(self, container_id: str) -> int | None:
        """The rank's main process, the leader of its process group; None before it started."""
        pids = _read_json(self._dir(container_id) / PIDS)
        child = pids.get("child_pid") if pids else None
        return child if isinstance(child, int) and child > 0 else None

    async def open(self) -> None:
        """Nothing to open: the ranks are files and processes on this machine."""

    async def image_id(self, image: str) -> str | None:
        """There are no images on the local cluster; every rank runs this machine's software."""
        return IMAGE_ID

    async def find(self, labels: dict[str, str]) -> list[ContainerState]:
        """Every rank whose labels include all of ``labels``, oldest first."""
        found: list[tuple[str, ContainerState]] = []
        for container_id, meta in self._metas():
            have = meta.get("labels") or {}
            if all(have.get(k) == v for k, v in labels.items()):
                found.append((str(meta.get("created_at", "")), self._state(container_id, meta)))
        found.sort(key=lambda item: (item[0], item[1].id))
        return [state for _, state in found]

    def _metas(self) -> list[tuple[str, dict[str, Any]]]:
        if not self.state_dir.is_dir():
            return []
        out: list[tuple[str, dict[str, Any]]] = []
        for entry in sorted(self.state_dir.iterdir()):
            if entry.name.startswith(ID_PREFIX) and is_safe(entry.name) and not entry.is_symlink():
                meta = _read_json(entry / META)
                if meta is not None:
                    out.append((entry.name, meta))
        return out

    async def inspect(self, container_id: str) -> ContainerState:
        return self._inspect(container_id)

    async def named(self, name: str) -> ContainerState | None:
        for container_id, meta in self._metas():
            if meta.get("name") == name:
                return self._state(container_id, meta)
        return None

    def _inspect(self, container_id: str) -> ContainerState:
        meta = _read_json(self._dir(container_id) / META)
        if meta is None:
            return ContainerState(id=container_id, name="", status="missing")
        return self._state(container_id, meta)

    def _state(self, container_id: str, meta: dict[str, Any]) -> ContainerState:
        folder = self._dir(container_id)
        pids = _read_json(folder / PIDS)
        done = _read_json(folder / EXIT)
        started_at = pids.get("started_at") if pids else None
        common: dict[str, Any] = {
            "id": container_id,
            "name": str(meta.get("name", "")),
            "labels": {str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            "image_id": IMAGE_ID,
            "started_at": started_at,
            "created_at": meta.get("created_at"),
        }
        if done is not None:
            code = done.get("exit_code")
            return ContainerState(status="exited", exit_code=code if isinstance(code, int) else None,
                                  finished_at=done.get("finished_at"), **common)
        if pids is None:
            if not folder.is_dir():
                return ContainerState(id=container_id, name=common["name"], status="missing")
            return ContainerState(status="created", **common)
        if self._alive(pids):
            return ContainerState(status="running", **common)
        # Re-read: the supervisor may have recorded the exit just before it went away.
        done = _read_json(folder / EXIT)
        if done is not None:
            return self._state(container_id, meta)
        return ContainerState(status="dead", **common)

    @staticmethod
    def _alive(pids: dict[str, Any]) -> bool:
        return pid_alive(pids.get("shim_pid"), pids.get("shim_start")) or LocalRuntime._child_alive(pids)

    @staticmethod
    def _child_alive(pids: dict[str, Any]) -> bool:
        return pid_alive(pids.get("child_pid"), pids.get("child_start"))

    async def run(self, spec: ContainerSpec, extra_labels: dict[str, str]) -> ContainerState:
        """Start ``spec`` as a detached local process; returns once it has started (or failed to).

        A rank that already has the name, running or not, is ``NameTaken``, as in docker: the
        caller removes it when it is its own.
        """
        holder = await self.named(spec.name)
        if holder is not None:
            raise NameTaken("local", holder)

        container_id = ID_PREFIX + secrets.token_hex(6)
        private_dir(self.state_dir)
        folder = private_mkdir(self._dir(container_id))  # meta.json holds the rank's environment
        argv = spec.argv
        secret_at = spec.secrets.arg_positions(argv)
        meta = {
            "id": container_id,
            "name": spec.name,
            # secret flag values reach the rank through its environment only (local_shim)
            "argv": [t[:secret_at[i]] + MASK if i in secret_at else t for i, t in enumerate(argv)],
            "secret_args": {str(i): argv[i] for i in secret_at},
            "redact": spec.secret_values(),  # masked in output.log before it is written
            "env": dict(spec.env),
            "labels": {**spec.labels, **extra_labels},
            "image": spec.image,
            "created_at": utc_now(),
        }
        meta_path = folder / META
        write_json_atomic(meta_path, meta)
        # The shim's own environment stays sparktui's; the rank's env is applied by the shim.
        env = with_pythonpath(dict(os.environ), project_root())
        with open(folder / SHIM_LOG, "ab", opener=opener) as log:
            launcher = subprocess.Popen(
                [sys.executable, "-m", "sparktui.agents.local_shim", str(meta_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True, close_fds=True,
            )
        # The launcher exits as soon as the detached supervisor has started the rank.
        deadline = time.monotonic() + SHIM_START_TIMEOUT_S
        while (code := launcher.poll()) is None:
            if time.monotonic() > deadline:
                launcher.kill()
                launcher.wait()
                code = -signal.SIGKILL
                break
            await asyncio.sleep(0.01)
        if code != 0:
            raise RuntimeError(
                f"local rank {spec.name!r} ({container_id}): the supervisor did not start "
                f"(exit {code}): {self._shim_log_tail(folder)}")
        return await self.inspect(container_id)

    @staticmethod
    def _shim_log_tail(folder: Path) -> str:
        try:
            text = (folder / SHIM_LOG).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no supervisor log)"
        return " | ".join(text.strip().splitlines()[-5:]) or "(supervisor log is empty)"

    async def stop(self, container_id: str, timeout: float = 10.0) -> None:
        """SIGTERM the rank's process group, SIGKILL it after ``timeout`` seconds.

        Returns once the exit is recorded. If the supervisor is gone too (killed), the exit is
        recorded here as ``128 +`` the last signal sent.
        """
        folder = self._dir(container_id)
        pids = _read_json(folder / PIDS)
        if pids is None or (folder / EXIT).exists() or not self._alive(pids):
            return
        sent = signal.SIGTERM
        self._signal(pids, sent)
        if not await self._wait_recorded(folder, pids, timeout):
            sent = signal.SIGKILL
            self._signal(pids, sent)
            if not await self._wait_recorded(folder, pids, KILL_GRACE_S):
                # The supervisor itself is stuck: end it and record the exit in its place.
                if pid_alive(pids.get("shim_pid"), pids.get("shim_start")):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pids["shim_pid"]), signal.SIGKILL)
                await self._wait_recorded(folder, pids, KILL_GRACE_S)
        if not (folder / EXIT).exists() and folder.is_dir():
            write_json_atomic(folder / EXIT, {
                "exit_code": 128 + int(sent), "signal": int(sent), "finished_at": utc_now(),
                "recorded_by": "LocalRuntime.stop (the supervisor was gone)",
            })

    def _signal(self, pids: dict[str, Any], sig: signal.Signals) -> None:
        """Signal the rank's group if the rank is verifiably alive, else its supervisor."""
        try:
            if self._child_alive(pids):
                os.killpg(int(pids["child_pid"]), sig)
            elif pid_alive(pids.get("shim_pid"), pids.get("shim_start")):
                os.kill(int(pids["shim_pid"]), sig)  # forwards SIGTERM to whatever is left
        except (ProcessLookupError, PermissionError):
            pass

    async def _wait_recorded(self, folder: Path, pids: dict[str, Any], timeout: float) -> bool:
        """True once ``exit.json`` exists, or once no process is left to write it."""
        deadline = time.monotonic() + timeout
        while True:
            if (folder / EXIT).exists() or not self._alive(pids):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)

    async def remove(self, container_id: str) -> None:
        """Stop the rank if it runs, then forget it (its log goes too). Unknown ids are fine."""
        folder = self._dir(container_id)
        if not folder.is_dir():
            return
        await self.stop(container_id)
        await asyncio.to_thread(shutil.rmtree, folder, True)

    async def logs(self, container_id: str, cursor: str | None, follow: bool = True,
                   secrets: Sequence[str] = ()) -> AsyncIterator[LogChunk]:
        """Batches of complete lines from byte offset ``cursor`` of ``output.log``.

        The cursor is the byte offset after the last line delivered, so resuming repeats and
        skips nothing. Following polls every ``POLL_S`` and ends once the rank has exited and
        the file is read to its end.
        """
        folder = self._dir(container_id)
        path = folder / OUTPUT
        offset = int(cursor) if cursor else 0
        if offset < 0:
            raise ValueError(f"bad log cursor {cursor!r}")
        handle: BinaryIO | None = None
        alive_due = 0.0  # when to ask again whether its processes live
        try:
            while True:
                if handle is None and path.exists():
                    handle = open(path, "rb")  # noqa: SIM115 - held across polls, closed below
                chunk = self._read_chunk(handle, offset, final=False)
                if chunk is None:
                    # Only a rank that is done may end on a line without its newline; read once
                    # more after seeing it done, to catch what it wrote just before.
                    now = time.monotonic()
                    processes = now >= alive_due
                    if processes:
                        alive_due = now + ALIVE_EVERY_S
                    done = self._finished(folder, processes)
                    if handle is None and path.exists():
                        handle = open(path, "rb")  # noqa: SIM115
                    chunk = self._read_chunk(handle, offset, final=done)
                    if chunk is None:
                        if done or not follow:
                            return
                        await asyncio.sleep(POLL_S)
                        continue
                offset = int(chunk.cursor)
                yield chunk
        finally:
            if handle is not None:
                handle.close()

    def _finished(self, folder: Path, processes: bool = True) -> bool:
        """No more output will come: the rank exited, vanished or was removed. Asked at every
        poll that found nothing new (ten times a second per rank), so it reads only what
        decides it, in the folder already checked (``_inspect`` also reads the metadata and
        checks the folder's path again); without ``processes``, only whether the exit is
        recorded (``ALIVE_EVERY_S``)."""
        if (folder / EXIT).exists():
            return True
        if not processes:
            return False
        pids = _read_json(folder / PIDS)
        if pids is None:  # the supervisor is starting (created), or the rank was removed
            return not folder.is_dir()
        return not self._alive(pids)

    @staticmethod
    def _read_chunk(handle: BinaryIO | None, offset: int, final: bool) -> LogChunk | None:
        """Up to ``CHUNK_LINES`` complete lines (about ``CHUNK_BYTES``) from ``offset``.

        A last line without its newline is delivered only when the log is ``final``.
        """
        if handle is None:
            return None
        handle.seek(offset)
        data = handle.read(CHUNK_BYTES)
        end = data.rfind(b"\n")
        while end < 0 and len(data) >= CHUNK_BYTES:  # one line longer than a chunk: read it whole
            more = handle.read(CHUNK_BYTES)
            if not more:
                break
            data += more
            end = data.rfind(b"\n")
        if end >= 0:
            data = data[: end + 1]
        elif not (final and data):
            return None
        raw_lines = data.split(b"\n")
        if raw_lines[-1] == b"":
            raw_lines.pop()
        raw_lines = raw_lines[:CHUNK_LINES]
        # min(): the unterminated last line of a finished log has no newline to count.
        consumed = min(sum(len(raw) + 1 for raw in raw_lines), len(data))
        lines: list[tuple[str, str]] = []
        for raw in raw_lines:
            text = raw.decode("utf-8", errors="replace")
            stamp, sep, rest = text.partition(" ")
            lines.append((stamp, rest) if sep else ("", text))
        return LogChunk(lines=lines, cursor=str(offset + consumed))
