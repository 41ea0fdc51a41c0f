"""A run's log files and cursors: throttled cursor saves and the cut-back on resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sparktui.core import runstore
from sparktui.core.runstore import RunStore


def lines(start: int, count: int) -> list[tuple[str, str]]:
    return [(f"2026-01-01T00:00:{i % 60:02d}.000000Z", f"line {i}") for i in range(start, start + count)]


def saved(run_dir: Path) -> dict[str, dict[str, object]]:
    """cursors.json without the byte sizes (checked on their own where they matter)."""
    data: dict[str, dict[str, object]] = json.loads((run_dir / "cursors.json").read_text())
    return {rank: {k: v for k, v in entry.items() if k != "bytes"} for rank, entry in data.items()}


def test_truncate_keeps_the_first_lines(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create("demo")
    log = run.log(0)
    log.append(lines(1, 10))
    assert log.truncate(12) == 0 and log.lines == 10
    assert log.truncate(4) == 6
    assert [text for _, _, text in log.read()] == ["line 1", "line 2", "line 3", "line 4"]
    assert log.append(lines(5, 1)) == [(5, "2026-01-01T00:00:05.000000Z", "line 5")]
    assert runstore.RankLog(log.path).lines == 5  # counted again from the file


def test_appends_through_the_open_file_land_after_a_cut_and_are_on_disk_at_once(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create("demo")
    assert run.try_lock()
    log = run.log(0)
    log.append(lines(1, 6))
    assert runstore.RankLog(log.path).lines == 6  # another reader sees each batch at once
    log.truncate(3)  # through another handle, as a resume cuts a file back
    log.append([("2026-01-01T00:00:09.000000Z", "nine\nlines \ud800 here\r")])
    raw = log.path.read_bytes()
    assert b"\0" not in raw  # the open file appends at the end, never where it was
    assert [text for _, _, text in runstore.RankLog(log.path).read()] == [
        "line 1", "line 2", "line 3", "nine lines ? here"]
    assert log.path.stat().st_mode & 0o777 == 0o600
    run.unlock()  # lets go of the rank files
    assert log._out is None
    assert log.append(lines(5, 1))[0][0] == 5  # and opens again when lines come


def test_the_follower_saves_cursors_at_most_every_half_second(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(runstore.time, "monotonic", lambda: now[0])
    run = RunStore(tmp_path).create("demo")
    assert run.try_lock()
    run.log(0).append(lines(1, 3))
    run.set_cursor(0, "c0", "300")
    assert saved(run.dir)["0"] == {"container_id": "c0", "cursor": "300", "lines": 3}
    run.log(0).append(lines(4, 2))
    now[0] += 0.1
    run.set_cursor(0, "c0", "500")  # too soon: kept in memory
    assert saved(run.dir)["0"]["cursor"] == "300"
    assert run.cursors()[0] == {"container_id": "c0", "cursor": "500", "lines": 5,
                                "bytes": run.log(0).path.stat().st_size}
    now[0] += 0.5
    run.log(1).append(lines(1, 1))
    run.set_cursor(1, "c1", "100")
    assert saved(run.dir)["0"]["cursor"] == "500" and saved(run.dir)["1"]["lines"] == 1
    run.log(0).append(lines(6, 1))
    run.set_cursor(0, "c0", "600")
    run.unlock()  # the follower leaves: what it holds is written
    assert saved(run.dir)["0"] == {"container_id": "c0", "cursor": "600", "lines": 6}


def test_deferred_cursors_are_written_by_the_caller_and_never_go_back(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The follower defers: it takes a snapshot on the event loop and writes it in a thread.
    A snapshot older than what is on disk (a slow thread) is dropped."""
    now = [100.0]
    monkeypatch.setattr(runstore.time, "monotonic", lambda: now[0])
    run = RunStore(tmp_path).create("demo")
    assert run.try_lock()
    run.log(0).append(lines(1, 3))
    run.set_cursor(0, "c0", "300", defer=True)
    assert not (run.dir / "cursors.json").exists() and run.cursors_due()
    older = run.take_cursors()
    assert older is not None and not run.cursors_due() and run.take_cursors() is None
    run.log(0).append(lines(4, 2))
    run.set_cursor(0, "c0", "500", defer=True)
    assert not run.cursors_due()  # changed, but the last snapshot is not half a second old
    now[0] += 0.5
    assert run.cursors_due()
    newer = run.take_cursors()
    assert newer is not None
    run.write_cursors(newer)
    run.write_cursors(older)  # the slow one arrives last
    assert saved(run.dir)["0"] == {"container_id": "c0", "cursor": "500", "lines": 5}
    run.set_cursor(0, "c0", "600", defer=True, save=True)  # save wins: written at once
    assert saved(run.dir)["0"]["cursor"] == "600"


def test_without_the_lock_every_cursor_is_written_at_once(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create("demo")
    run.set_cursor(2, "c2", None)
    run.set_cursor(3, "c3", None)
    assert saved(run.dir) == {"2": {"container_id": "c2", "cursor": None, "lines": 0},
                              "3": {"container_id": "c3", "cursor": None, "lines": 0}}


def test_resume_cuts_the_file_back_to_the_saved_cursor(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run = store.create("demo")
    assert run.try_lock()
    run.log(0).append(lines(1, 4))
    run.set_cursor(0, "c0", "400", save=True)
    run.log(0).append(lines(5, 3))  # read, then the follower was killed before it saved
    assert run._lock is not None
    run._lock.close()  # the process died: the kernel dropped its lock, nothing was saved
    again = store.open(run.id)
    assert again is not None and again.try_lock()
    assert again.resume(0, "c0") == "400"
    assert [text for _, _, text in again.log(0).read()] == [f"line {i}" for i in range(1, 5)]
    assert next(e for e in again.events() if e["kind"] == "log-rewound")["lines"] == 3
    assert again.resume(0, "another container") is None  # not seen before: from its start
    assert again.log(0).lines == 4


def test_after_a_restart_marker_the_next_container_is_read_from_its_start_after_it(
        tmp_path: Path) -> None:
    """The marker is accounted at once (``NEXT_CONTAINER``): a resume of the old container
    keeps it, and the new container's lines a killed follower wrote before saving a cursor of
    its own are cut and read again from its start (found by the chaos soak: the marker was cut
    off by a resume, and the new container's lines were skipped by the catch-up)."""
    store = RunStore(tmp_path)
    run = store.create("demo")
    assert run.try_lock()
    run.log(0).append(lines(1, 4))
    run.set_cursor(0, "old", "400", save=True)
    run.log(0).append([("2026-01-01T00:01:00.000000Z", f"{runstore.MARKER}rank 0 restarted ---")])
    run.set_cursor(0, runstore.NEXT_CONTAINER, None, save=True)
    run.log(0).append(lines(5, 2))  # the new container's first lines, then the follower died
    assert run._lock is not None
    run._lock.close()
    again = store.open(run.id)
    assert again is not None and again.try_lock()
    assert again.resume(0, "new") is None  # from the new container's start ...
    texts = [text for _, _, text in again.log(0).read()]
    assert texts[-1].startswith(runstore.MARKER) and len(texts) == 5  # ... after the marker


def test_a_full_disk_batch_is_taken_back_whole(tmp_path: Path) -> None:
    """/dev/full takes nothing: the batch's lines are not counted as written."""
    log = runstore.RankLog(Path("/dev/full"), count=0)
    with pytest.raises(OSError):
        log.append(lines(1, 3))
    assert log.count == 0


def test_a_file_is_counted_as_a_binary_read_of_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "r0.log"
    for data in (b"", b"a\n", b"a\nb", b"a\r\nb\n\n", b"x\n" * 700_000 + b"tail"):
        path.write_bytes(data)
        with path.open("rb") as f:
            assert runstore.RankLog(path).lines == sum(1 for _ in f), data[:20]


def test_a_resume_whose_cursor_says_the_size_reads_nothing(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The cursor's line count and byte size match the file: taken as they are (the file is
    never read or cut); a file of another size is cut back as before."""
    store = RunStore(tmp_path)
    run = store.create("demo")
    run.log(0).append(lines(1, 5))
    run.set_cursor(0, "c0", "500", save=True)
    again = store.open(run.id)
    assert again is not None
    real = runstore.RankLog._ensure_count
    monkeypatch.setattr(runstore.RankLog, "_ensure_count",
                        lambda self: real(self) if self.count >= 0 else pytest.fail("counted"))
    assert again.resume(0, "c0") == "500" and again.log(0).lines == 5
    assert not [e for e in again.events() if e["kind"] == "log-rewound"]


def test_a_cursor_without_a_byte_size_cuts_back_by_lines(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create("demo")
    run.log(0).append(lines(1, 6))
    (run.dir / "cursors.json").write_text(json.dumps({"0": {"container_id": "c0", "cursor": "7", "lines": 2}}))
    assert run.resume(0, "c0") == "7"
    assert [text for _, _, text in run.log(0).read()] == ["line 1", "line 2"]


def test_cursors_saved_before_line_counts_resume_as_they_are(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create("demo")
    run.log(0).append(lines(1, 3))
    (run.dir / "cursors.json").write_text(json.dumps({"0": {"container_id": "c0", "cursor": "9"}}))
    assert run.resume(0, "c0") == "9" and run.log(0).lines == 3


def test_since_restart_is_what_the_boot_checks_read(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create("demo")
    log = run.log(0)
    log.append(lines(1, 2))
    assert log.since_restart(runstore.last_restarts(run.events()).get(0)) == [(1, "line 1"), (2, "line 2")]
    log.append([("2026-01-01T00:01:00Z", f"{runstore.MARKER}rank 0 restarted by the operator")])
    run.event("restart", rank=0, old="c0", group=False, how="by the operator", line=log.lines)
    log.append(lines(3, 1))
    restart = runstore.last_restarts(run.events()).get(0)
    assert restart is not None and log.since_restart(restart) == [(4, "line 3")]


def test_a_container_printing_the_restart_marker_restarts_nothing(tmp_path: Path) -> None:
    """The marker's text is what sparktui writes at a restart, but a container can print it
    too: only the run's events say a rank restarted."""
    run = RunStore(tmp_path).create("demo")
    log = run.log(0)
    log.append(lines(1, 2))
    log.append([("2026-01-01T00:00:30Z", f"{runstore.MARKER}rank 0 restarted by the operator "
                                         "(container 0123456789ab replaced) ---")])
    log.append(lines(3, 1))
    assert runstore.last_restarts(run.events()) == {}
    assert [no for no, _ in log.since_restart(None)] == [1, 2, 3, 4]


def test_a_restart_recorded_without_its_line_starts_at_the_first_line_after_it(tmp_path: Path) -> None:
    """A run from before the restart event named its marker line: the lines after the first
    one stamped at or after the event (the marker, written right after it) are the new boot's."""
    run = RunStore(tmp_path).create("demo")
    log = run.log(0)
    log.append(lines(1, 2))  # 00:00:01, 00:00:02
    events = [{"ts": "2026-01-01T00:00:10.000000Z", "kind": "restart", "rank": 0}]
    log.append([("2026-01-01T00:00:10.500000Z", f"{runstore.MARKER}rank 0 restarted ---")])
    log.append([("2026-01-01T00:00:12.000000000Z", "new boot")])
    assert log.since_restart(runstore.last_restarts(events)[0]) == [(4, "new boot")]


def test_a_follower_in_another_process_is_seen_without_taking_its_lock(tmp_path: Path) -> None:
    """``followed_elsewhere`` reads the kernel's table of locks: a follower in another process
    is seen, this process's own lock is not another's, and the lock is never taken (a follower
    starting meanwhile must get it)."""
    import subprocess
    import sys

    run = RunStore(tmp_path).create("demo")
    assert not run.followed_elsewhere()  # no lock file yet, then no lock
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print('held', flush=True); sys.stdin.read()"), str(run.dir / "follow.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert run.followed_elsewhere()
        assert not run.try_lock()  # it was held all along: the look took nothing
    finally:
        holder.communicate("", timeout=10)
    assert not run.followed_elsewhere()
    assert run.try_lock() and not run.followed_elsewhere()  # our own lock is not another's
    run.unlock()


def test_the_locks_table_is_read_line_by_line() -> None:
    dev = os.makedev(0x103, 0x2b)
    table = ("1: POSIX  ADVISORY  WRITE 77 01:03:5512 0 EOF\n"
             "2: FLOCK  ADVISORY  WRITE 4321 103:2b:5512 0 EOF\n"
             "2: -> FLOCK  ADVISORY  WRITE 999 103:2b:5512 0 EOF\n")
    assert runstore.lock_holder(table, dev, 5512, pid=1) == 4321
    assert runstore.lock_holder(table, dev, 5512, pid=4321) is None  # ours; the waiter holds nothing
    assert runstore.lock_holder(table, dev, 5513, pid=1) is None
    assert runstore.lock_holder(table, os.makedev(0x103, 0x2c), 5512, pid=1) is None
