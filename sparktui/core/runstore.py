"""A run's state directory: plan.json, events.jsonl, one log file per rank, the log cursors.

Logs are written as they arrive, so nothing is lost when sparktui exits and ``sparktui logs``
works afterwards. One process at a time follows a run's containers (it holds ``follow.lock``);
others read the files.

A rank's cursor (where its container's log was read up to) is saved with the number of lines
its file held at that point. Saving is throttled (a flood brings dozens of batches a second and
each save is a rewrite and an fsync), so after a hard kill the file may run ahead of its saved
cursor; the next follower cuts the file back to the saved line count and reads on from the saved
cursor, which brings the same lines again: no gap and no duplicate. The follower takes a snapshot
of the cursors where it reads (``take_cursors``) and writes it in a thread (``write_cursors``):
an fsync on the event loop held the console's keys up for tens of milliseconds on a busy disk.
"""

from __future__ import annotations

import _thread
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sparktui.core.names import check_name, child, is_safe
from sparktui.core.private import opener, private_dir, private_mkdir, private_open, write_private
from sparktui.core.redact import Redactor

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:  # nor are the plan's models (pydantic) needed to read a run's files
    from collections.abc import Iterable
    from typing import IO, Any, TypeVar

    from sparktui.core.plan import Plan

    _T = TypeVar("_T")

END_FIRST = 1 << 16
"""What an attach reads first of each rank's file for its last lines and its progress: a live
rank's are in its last 64 KiB (at 32 ranks a megabyte each was 74 ms of decoding on the replay's
path); ``RankLog.last`` and ``replay.last_lines`` widen to ``END_MOST`` when they are not."""
END_MOST = 1 << 20
MARKER = "--- sparktui: "
NEXT_CONTAINER = "next"
"""A rank's saved cursor right after a restart marker: whatever container comes next is read
from its start, after the marker."""


def utc_now() -> str:
    from datetime import datetime, timezone  # here: reading a run's files needs no datetime (1 ms)

    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ts_epoch(ts: str | None) -> float | None:
    """Seconds since the epoch from an RFC 3339 UTC timestamp (any fraction length)."""
    if not ts or ts.startswith("0001-"):
        return None
    from datetime import datetime, timezone

    base, _, frac = ts.rstrip("Z").partition(".")
    head = base[:19]
    # The usual shape is read by position: strptime took 5x as long, and every batch of lines
    # of every rank is stamped twice (the follower's progress, the console's quiet column).
    fields = (head[:4], head[5:7], head[8:10], head[11:13], head[14:16], head[17:19])
    try:
        if len(head) == 19 and head[4] + head[7] + head[10] + head[13] + head[16] == "--T::" \
                and "".join(fields).isdigit():
            year, month, day, hour, minute, second = (int(f) for f in fields)
            whole = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
        else:
            whole = datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    digits = "".join(ch for ch in frac if ch.isdigit())[:9]
    return whole.timestamp() + (int(digits) / 10 ** len(digits) if digits else 0.0)


class RankLog:
    """``r<rank>.log``: one ``<timestamp>\\t<text>`` line per log line, numbered from 1."""

    def __init__(self, path: Path, count: int = -1) -> None:
        self.path = path
        self.count = count  # lines in the file; -1 until counted
        self._out: IO[bytes] | None = None  # open for appending while lines come (``append``)

    def _ensure_count(self) -> None:
        """The file's lines counted as a binary read of them counts (a last line without its
        newline is one), a megabyte at a time at memory speed: a line at a time took 0.1 s a
        million lines, for each rank of every command that attaches."""
        if self.count < 0:
            self.count = 0
            if self.path.exists():
                count, last = 0, b"\n"
                with self.path.open("rb", buffering=0) as f:
                    while chunk := f.read(1 << 20):
                        count += chunk.count(b"\n")
                        last = chunk[-1:]
                self.count = count + (last != b"\n")

    def known(self, lines: int, size: int) -> bool:
        """Take ``lines`` as the count when the file is ``size`` bytes (a saved cursor says
        both): nothing is read. False when the size differs."""
        if self.size != size:
            return False
        self.count = lines
        return True

    def append(self, lines: list[tuple[str, str]]) -> list[tuple[int, str, str]]:
        """Append and return ``(line_no, ts, text)`` for each line.

        The file stays open between batches (``close`` ends that): an open and a close for
        every batch was a fifth of the follower's time under 32 flooding ranks. Each batch is
        written straight through (unbuffered, ``O_APPEND``), so what ``append`` returned is in
        the file, as when it was opened and closed for each batch, and a ``truncate`` through
        another handle leaves the next batch at the new end."""
        self._ensure_count()
        numbered = []
        buf = []
        for ts, text in lines:
            clean = text.replace("\n", " ").replace("\r", "")
            self.count += 1
            numbered.append((self.count, ts, clean))
            buf.append(f"{ts}\t{clean}\n")
        data = memoryview("".join(buf).encode("utf-8", "replace"))
        if self._out is None:
            self._out = open(self.path, "ab", buffering=0, opener=opener)  # noqa: SIM115
        done = 0
        try:
            while data:
                written = self._out.write(data)
                if not written:
                    raise OSError(f"nothing could be written to {self.path}")
                done += written
                data = data[written:]
        except OSError:
            # a full disk: the batch is taken back whole (no half line left to look written),
            # and its lines are numbered again when the caller writes them later
            self.count -= len(numbered)
            if done:
                fd = self._out.fileno()
                os.ftruncate(fd, os.fstat(fd).st_size - done)
            raise
        return numbered

    def close(self) -> None:
        """Let go of the file (``append`` opens it again when it needs to)."""
        if self._out is not None:
            out, self._out = self._out, None
            out.close()

    def __del__(self) -> None:
        self.close()

    def truncate(self, lines: int, size: int | None = None) -> int:
        """Keep the first ``lines`` lines (``size`` bytes, when known: no reading); returns how
        many were cut off."""
        self._ensure_count()
        if self.count <= lines:
            return 0
        with self.path.open("rb+") as f:
            if size is None:
                for _ in range(lines):
                    if not f.readline():
                        break
                size = f.tell()
            f.truncate(size)
        cut, self.count = self.count - lines, lines
        return cut

    @property
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def read(self, start: int = 1) -> Iterator[tuple[int, str, str]]:
        if not self.path.exists():
            return
        with self.path.open("r", encoding="utf-8", errors="replace") as f:
            for no, raw in enumerate(f, 1):
                if no < start:
                    continue
                ts, _, text = raw.rstrip("\n").partition("\t")
                yield no, ts, text

    def end(self, window: int = END_MOST) -> tuple[bytes, int]:
        """The file's last ``window`` bytes and its size (``b"", 0`` when there is none): what
        ``last`` and ``core.replay.last_lines`` read, once for both."""
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, 2)
                f.seek(max(0, size - window))
                return f.read(), size
        except FileNotFoundError:
            return b"", 0

    def last(self, keep: Callable[[str], bool] = lambda text: True,
             window: int = END_MOST, end: tuple[bytes, int] | None = None) -> tuple[str, str] | None:
        """``(ts, text)`` of the file's last line that ``keep`` keeps, read from its end (a log
        of hours is not read whole for it); None when none is in its last ``window`` bytes.
        ``end``: the file's last bytes already read (``end()``); fewer than ``window`` of a
        longer file, and none kept among them: the last ``window`` bytes are read."""
        return self.from_end(lambda data, size: _last_kept(data, size, keep), end, window)

    def from_end(self, pick: Callable[[bytes, int], _T | None],
                 end: tuple[bytes, int] | None = None, window: int = END_MOST) -> _T | None:
        """What ``pick`` finds in the file's last bytes and size: in ``end`` (``end()``, already
        read), and when it finds nothing there and they are fewer than ``window`` of a longer
        file, in the last ``window`` bytes (an attach reads ``END_FIRST`` first)."""
        data, size = end if end is not None else self.end(window)
        found = pick(data, size)
        if found is None and len(data) < min(size, window):
            found = pick(*self.end(window))
        return found

    def since_restart(self, restart: dict[str, Any] | None) -> list[tuple[int, str]]:
        """``[(line_no, text), ...]`` after the rank's last restart (``last_restarts``; all of
        them when it never restarted): what the rank's boot checks are about. The restart's
        event says where its marker line is; a line's text never does (a container may print
        anything, sparktui's marker included)."""
        after = restart_line(restart) if restart is not None else 0
        stamp = ts_epoch(restart.get("ts")) if restart is not None and after is None else None
        batch: list[tuple[int, str]] = []
        for no, ts, text in self.read():
            if after is None:  # a run from before the event recorded its line: by time
                when = ts_epoch(ts)
                if stamp is None or when is None or when < stamp:
                    continue
                after = no  # the first line written after the restart: its marker
                continue
            if no > after:
                batch.append((no, text))
        return batch

    @property
    def lines(self) -> int:
        self._ensure_count()
        return self.count


def _last_kept(data: bytes, size: int, keep: Callable[[str], bool]) -> tuple[str, str] | None:
    """``RankLog.last`` over a file's last bytes ``data`` (of ``size`` in all)."""
    if not size:
        return None
    lines = data.decode("utf-8", "replace").split("\n")
    if size > len(data):
        lines = lines[1:]  # the first may be the end of a longer line
    for raw in reversed(lines):
        ts, tab, text = raw.partition("\t")
        if tab and keep(text):
            return ts, text
    return None


def last_restarts(events: Iterable[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each rank's last ``restart`` event in the run: restarts are counted from the events,
    never from the log lines (which a container writes)."""
    found: dict[int, dict[str, Any]] = {}
    for ev in events:
        rank = ev.get("rank")
        if ev.get("kind") == "restart" and isinstance(rank, int):
            found[rank] = ev
    return found


def restart_line(event: dict[str, Any]) -> int | None:
    """The number of the marker line a restart event wrote in its rank's log; None for a run
    from before the event said."""
    line = event.get("line")
    return line if isinstance(line, int) and not isinstance(line, bool) else None


Cursor = dict[str, "Any"]  # {"container_id": str, "cursor": str | None, "lines": int, "bytes": int}
CURSOR_SAVE_S = 0.5  # at most this often while following (see the module docstring)


class Run:
    """One run's folder: its plan, its events, each rank's log and the follower's cursors."""

    def __init__(self, id: str, dir: Path) -> None:
        self.id = id
        self.dir = dir
        self._logs: dict[int, RankLog] = {}
        self._lock: IO[str] | None = None
        self._cursors: dict[int, Cursor] | None = None  # the follower's copy, newer than the file
        self._cursors_dirty = False
        self._cursors_saved = 0.0  # monotonic time of the last write (or snapshot taken to write)
        self._cursor_seq = 0  # snapshots taken
        self._cursor_written = 0  # the newest snapshot on disk
        self._cursor_write = _thread.allocate_lock()  # threading.Lock, without importing threading
        self.redactor = Redactor(())  # the plan's secrets
        self._unwritten: list[str] = []  # events a full disk kept back, in order

    @property
    def plan_path(self) -> Path:
        return self.dir / "plan.json"

    def write_plan(self, plan: Plan) -> None:
        """Secrets stay masked on disk (env, args, the docker run line); from now on the plan's
        secret values are masked in every event too."""
        self.redactor = plan.redactor()
        write_private(self.plan_path, json.dumps(plan.to_json(show_secrets=False), indent=2))

    def rank_paths(self) -> dict[int, Path]:
        """Every rank's log file the run has, by rank (a rank that never wrote has none)."""
        found = {}
        for path in self.dir.glob("r*.log"):
            digits = path.name[1:-4]
            if digits.isascii() and digits.isdigit() and path.name == f"r{int(digits)}.log":
                found[int(digits)] = path
        return dict(sorted(found.items()))

    def ended(self) -> bool:
        """Whether nothing of the run can write a line any more: its last launch, restart or
        down was a ``down`` that removed every container (it records the ranks it could not
        in ``kept``). A ``down`` recorded without ``kept`` (before sparktui said) is not taken
        as an end: the containers are asked."""
        last: dict[str, Any] | None = None
        for ev in self.events():
            if ev.get("kind") in ("up", "restart", "down"):
                last = ev
        return last is not None and last.get("kind") == "down" and last.get("kept") == []

    def log(self, rank: int) -> RankLog:
        if rank not in self._logs:
            self._logs[rank] = RankLog(self.dir / f"r{rank}.log")
        return self._logs[rank]

    def event(self, kind: str, **data: Any) -> None:
        """One line of events.jsonl; the plan's secret values are masked in every string.

        On a full disk the event is kept (``unwritten``) and written, in order, with the next
        one that can be: nothing half-written is left in the file, no event is lost while this
        process lives, and ``events`` includes those waiting."""
        record = {"ts": utc_now(), "kind": kind, **self.redactor.data(data)}
        self._unwritten.append(json.dumps(record, default=str) + "\n")
        self.flush_events()

    def flush_events(self) -> bool:
        """Write the events kept back by a full disk; True when none is left."""
        if not self._unwritten:
            return True
        data = "".join(self._unwritten).encode("utf-8")
        try:
            fd = opener(str(self.dir / "events.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except OSError:
            return False
        done = 0
        try:
            while done < len(data):
                done += os.write(fd, data[done:])
            self._unwritten.clear()
            return True
        except OSError:
            if done:
                os.ftruncate(fd, os.fstat(fd).st_size - done)
            return False
        finally:
            os.close(fd)

    @property
    def unwritten(self) -> int:
        return len(self._unwritten)

    def events(self) -> list[dict[str, Any]]:
        path = self.dir / "events.jsonl"
        text = path.read_text() if path.exists() else ""
        out = []
        for line in [*text.splitlines(), *self._unwritten]:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    # -- cursors: where each rank's container log was read up to --------------------------
    def _read_cursors(self) -> dict[int, Cursor]:
        try:
            raw = json.loads((self.dir / "cursors.json").read_text())
        except (OSError, ValueError):
            return {}
        return {int(k): v for k, v in raw.items() if isinstance(v, dict)}

    def cursors(self) -> dict[int, Cursor]:
        """The follower's cursors (kept in memory, saved now and then); others read the file."""
        if self._lock is None:
            return self._read_cursors()
        if self._cursors is None:
            self._cursors = self._read_cursors()
        return self._cursors

    def set_cursor(self, rank: int, container_id: str, cursor: str | None, *,
                   save: bool = False, defer: bool = False) -> None:
        """Record that rank's file holds everything up to ``cursor``; written to disk at once
        with ``save``, else within ``CURSOR_SAVE_S`` (or at ``save_cursors``). ``defer``: not
        written here; the caller writes ``take_cursors()`` when ``cursors_due()`` (the
        follower, in a thread)."""
        cursors = self.cursors()
        log = self.log(rank)
        cursors[rank] = {"container_id": container_id, "cursor": cursor, "lines": log.lines,
                         "bytes": log.size}
        self._cursors, self._cursors_dirty = cursors, True
        if defer and not save and self._lock is not None:
            return
        if save or self._lock is None or self.cursors_due():
            self.save_cursors()

    def cursors_due(self) -> bool:
        """Cursors changed and the last write is ``CURSOR_SAVE_S`` old."""
        return self._cursors_dirty and time.monotonic() - self._cursors_saved >= CURSOR_SAVE_S

    def take_cursors(self) -> tuple[int, str] | None:
        """The cursors as they are now, to hand to ``write_cursors`` (in any thread); None when
        nothing changed since the last snapshot."""
        if not self._cursors_dirty or self._cursors is None:
            return None
        self._cursor_seq += 1
        self._cursors_dirty = False
        self._cursors_saved = time.monotonic()
        return self._cursor_seq, json.dumps({str(k): v for k, v in sorted(self._cursors.items())})

    def write_cursors(self, snapshot: tuple[int, str]) -> None:
        """Write a snapshot and fsync it. Writes are one at a time, and a snapshot older than
        the one on disk is dropped, so snapshots written from several threads never go back."""
        seq, text = snapshot
        with self._cursor_write:
            if seq <= self._cursor_written:
                return
            try:
                write_private(self.dir / "cursors.json", text)
            except OSError:
                self._cursors_dirty = True  # a full disk: the next save writes them all again
                raise
            self._cursor_written = seq

    def save_cursors(self) -> None:
        snapshot = self.take_cursors()
        if snapshot is None:
            return
        self.write_cursors(snapshot)
        if self._lock is None:
            self._cursors = None  # not the follower: read the file next time

    def resume(self, rank: int, container_id: str) -> str | None:
        """Where to read ``container_id``'s log from: its saved cursor, after cutting the rank's
        file back to the lines that cursor accounts for (a follower killed between reading and
        saving left more); ``None`` (from the start) for a container not seen before, and for
        the first container after a restart marker (``NEXT_CONTAINER``: the file is cut back to
        the marker first). Reads the file when its line count is not known yet: call it in a
        thread."""
        saved = self.cursors().get(rank, {})
        if saved.get("container_id") not in (container_id, NEXT_CONTAINER):
            return None
        lines, size = saved.get("lines"), saved.get("bytes")
        log = self.log(rank)
        if isinstance(lines, int) and not (isinstance(size, int) and log.known(lines, size)):
            cut = log.truncate(lines, size if isinstance(size, int) else None)
            if cut:
                self.event("log-rewound", rank=rank, lines=cut)
        cursor = saved.get("cursor")
        if saved.get("container_id") == NEXT_CONTAINER:
            return None  # the rank's next container after a restart marker: from its start
        return cursor if isinstance(cursor, str) else None

    # -- one follower at a time ----------------------------------------------------------
    def try_lock(self) -> bool:
        """Become this run's follower; False when another live process is."""
        if self._lock is not None:
            return True
        f = private_open(self.dir / "follow.lock", "a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            return False
        self._lock = f
        self._cursors = None  # the previous follower may have saved newer ones
        return True

    def followed_elsewhere(self) -> bool:
        """Whether another live process (a console or a watch) follows the run, writing its
        files as its containers write: it holds ``follow.lock``. Read from the kernel's table
        of locks (``/proc/locks``), never by taking the lock, which a follower starting at that
        moment must get; False where that cannot be told."""
        return self.follower_pid() is not None

    def follower_pid(self) -> int | None:
        """The process of another sparktui that follows the run (``followed_elsewhere``)."""
        try:
            st = (self.dir / "follow.lock").stat()
            text = Path("/proc/locks").read_text()
        except OSError:
            return None
        return lock_holder(text, st.st_dev, st.st_ino, os.getpid())

    def close_logs(self) -> None:
        """Close the rank files kept open for appending."""
        for log in self._logs.values():
            log.close()

    def unlock(self) -> None:
        self.save_cursors()
        self.close_logs()
        if self._lock is not None:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


def lock_holder(locks: str, dev: int, ino: int, pid: int) -> int | None:
    """The process other than ``pid`` that ``/proc/locks`` (``locks``) lists as holding a
    granted ``flock`` on the file (``dev``, ``ino``: ``1: FLOCK  ADVISORY  WRITE 4321
    00:2b:1234 0 EOF``); a waiter's line (``1: -> FLOCK ...``) holds nothing."""
    where = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    for line in locks.splitlines():
        fields = line.split()
        if (len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where
                and fields[4] != str(pid) and fields[4].isdigit()):
            return int(fields[4])
    return None


class RunStore:
    """``<state>/runs/<id>/``; ids are ``<recipe slug>-<UTC time>`` so they sort by age. An id
    is a safe name (``core.names``) whose folder stays inside ``runs/``: ids also come from
    container labels, which anyone who can start a container on a node can set."""

    def __init__(self, root: Path) -> None:
        self.root = root / "runs"

    def create(self, slug: str) -> Run:
        check_name(slug, "recipe name")
        private_dir(self.root)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        run_id = f"{slug}-{stamp}"
        n = 1
        while (self.root / run_id).exists():
            n += 1
            run_id = f"{slug}-{stamp}-{n}"
        return Run(run_id, private_mkdir(child(self.root, run_id, "run id")))

    def open(self, run_id: str) -> Run | None:
        """The run's folder, if it exists; ``UnsafeName`` for an id that is no safe name or
        whose folder leads outside ``runs/``."""
        d = child(self.root, run_id, "run id")
        return Run(run_id, d) if d.is_dir() else None

    def latest(self, slug: str) -> Run | None:
        if not self.root.is_dir():
            return None
        runs = sorted(p.name for p in self.root.iterdir()
                      if is_safe(p.name) and p.is_dir() and not p.is_symlink()
                      and p.name.startswith(f"{slug}-") and p.name[len(slug) + 1:][:1].isdigit())
        return Run(runs[-1], self.root / runs[-1]) if runs else None
