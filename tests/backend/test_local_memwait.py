"""A restart waits for memory to come back and for the old rank's processes to go, on the
local cluster (done-when 4's mechanism, without a GPU).

The test itself holds memory (a child that writes every page of about 1 GiB) so the machine's
available memory is below the launch's baseline less ``restart_margin``; the margin is set from
a fresh reading, just before each restart, so that the threshold sits about 380 MiB above
what the machine will have once the old ranks are stopped and about as far below what it
will have once the test lets go: in CI two other lanes run at once and move ``MemAvailable``
by hundreds of MiB, and either side has that much room; a restart that did not wait all the
same (more than that let go in the second between) is tried again, up to three times; the
long wait (60 s) outlasts another lane's hold on the other side. (``[memory]`` is no part of
the plan's hash: a new margin between restarts changes nothing that runs.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RECIPES, ROOT
from tests.runner import Cli, local_cli, local_env, sparktui_run

MIB = 1 << 20
HOLD = 960 * MIB
ROOM = 380 * MIB
ATTEMPTS = 3
"""A restart that did not wait because another lane let go of more than ``ROOM`` between the
reading and the restart is tried again with a fresh reading."""
NAME = "demo-memwait"
LEAVER = ("import runpy, subprocess; subprocess.Popen(['sleep', '{secs}'], start_new_session=True, "
          "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
          "runpy.run_module('sparktui.demo.engine', run_name='__main__')")
"""The demo engine, after it started a child in a session of its own (out of the rank's group)."""
HOLDER = ("import sys; b = b'\\x01' * int(sys.argv[1]); print('held', flush=True); "
          "sys.stdin.read()")


def demo(folder: Path, *, margin: str = "2GiB", wait: str = "60s", entry: list[str] | None = None) -> None:
    """demo-tp4 as ``folder/recipe.toml``: its own served name (its engines known by their
    command line) and this ``[memory]``; written again between restarts."""
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    text = text.replace('"--served-model-name", "demo-tp4"', f'"--served-model-name", "{NAME}"')
    if entry is not None:
        old = 'entrypoint = ["python3", "-m", "sparktui.demo.engine"]'
        assert old in text
        text = text.replace(old, f"entrypoint = {json.dumps(entry)}")
    folder.mkdir(exist_ok=True)
    (folder / "recipe.toml").write_text(
        text + f'\n[memory]\nrestart_margin = "{margin}"\nrestart_wait = "{wait}"\n')


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    folder = tmp_path / NAME
    demo(folder)
    return folder


@pytest.fixture
def cli(tmp_path: Path, recipe: Path) -> Iterator[Cli]:
    yield from local_cli(tmp_path, recipe)


def available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable")


def events(tmp_path: Path) -> list[dict[str, Any]]:
    [run_dir] = (tmp_path / "state").glob(f"**/runs/{NAME}-*")
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def waits(tmp_path: Path, phase: str) -> list[dict[str, Any]]:
    return [e for e in events(tmp_path) if e["kind"] == "memory-wait" and e["phase"] == phase]


def ranks_rss(tmp_path: Path) -> int:
    """What the demo's ranks hold now (their engines and supervisors, by command line): what
    comes back once they are stopped, at most."""
    total = 0
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes()
            if NAME.encode() in cmd or str(tmp_path).encode() in cmd:
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            continue
    return total


def status(cli: Cli, recipe: Path) -> list[dict[str, Any]]:
    res = cli("status", str(recipe), "--json")
    assert res.returncode == 0, res.stderr
    ranks: list[dict[str, Any]] = json.loads(res.stdout)["ranks"]
    return ranks


def until(what: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


class Held:
    """About 1 GiB written by a child of the test, until ``free``."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(HOLD)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "held\n"

    def free(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def margin_now(tmp_path: Path, baseline: int) -> int:
    """The margin that puts the wait's threshold ``ROOM`` above what the machine will have
    once the old ranks are stopped (the test holding its memory)."""
    margin = baseline - (available() + ranks_rss(tmp_path) + ROOM)
    if margin < 16 * MIB:
        pytest.skip(f"the machine has {(available() - baseline) // MIB} MiB more available "
                    "than before the launch: the test cannot hold enough to be below it")
    return margin


def test_a_group_restart_waits_for_memory_then_times_out_or_goes_on(
        cli: Cli, recipe: Path, tmp_path: Path) -> None:
    up = cli("up", str(recipe), "--wait")
    assert up.returncode == 0, up.stderr
    [base] = [e for e in events(tmp_path) if e["kind"] == "memory-baseline"]
    assert [n["node"] for n in base["nodes"]] == ["local0", "local1", "local2", "local3"]
    baseline = base["nodes"][0]["available"]

    held = Held()
    try:
        # a short wait: it runs out, says so, and the group goes on to ready
        for _attempt in range(ATTEMPTS):
            demo(recipe, margin=f"{margin_now(tmp_path, baseline) // MIB}MiB", wait="3s")
            short = cli("restart", str(recipe), "--group", "--wait")
            assert short.returncode == 0, short.stderr
            if waits(tmp_path, "start"):
                break  # else another lane let go of more than ROOM meanwhile: again
        assert "the restart waits for memory to come back" in short.stderr, short.stderr
        assert "waited 3 s (restart_wait) for memory to come back and the old processes to go, " \
               "and goes on anyway: local0: " in short.stderr, short.stderr
        assert "waiting for memory: local0: " in short.stderr  # the rank's cause
        [late] = waits(tmp_path, "timeout")
        assert late["seconds"] >= 3 and late["nodes"][0]["available"] < late["nodes"][0]["needed"]
        assert [r["state"] for r in status(cli, recipe)] == ["ready"] * 4

        # a long one: it waits, shown with the figures, until the test lets go
        for _attempt in range(ATTEMPTS):
            margin = margin_now(tmp_path, baseline)
            demo(recipe, margin=f"{margin // MIB}MiB", wait="60s")
            started = time.monotonic()
            restart = subprocess.Popen(
                [sys.executable, "-m", "sparktui", "restart", str(recipe), "--group", "--wait"],
                cwd=ROOT, env=local_env(tmp_path), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            found = until(lambda p=restart: waits(tmp_path, "start")[1:] or p.poll() is not None)
            if found is True:  # it went on without waiting (see above): again
                restart.communicate(timeout=90)
                continue
            break
        try:
            [start] = found
            row = start["nodes"][0]
            assert row["node"] == "local0" and row["ranks"] == [0]
            assert row["needed"] == baseline - (margin // MIB) * MIB
            assert row["available"] < row["needed"]
            assert row["text"].startswith(f"local0: {row['available'] / (1 << 30):.1f} GiB "
                                          f"available of {row['needed'] / (1 << 30):.1f} GiB "
                                          "needed; ")
            shown = status(cli, recipe)  # another process: the run's events say the wait
            assert [r["state"] for r in shown] == ["restarting"] * 4
            assert {r["cause"] for r in shown} == {"memory_wait"}
            assert shown[2]["detail"].startswith("waiting for memory: local2: ")
            assert restart.poll() is None  # still waiting
        finally:
            held.free()
            out, err = restart.communicate(timeout=90)
        assert restart.returncode == 0, err
        assert "memory back after" in err and "the restart goes on" in err, err
        [end] = waits(tmp_path, "end")
        assert end["seconds"] < time.monotonic() - started
        assert all(n["available"] >= n["needed"] for n in end["nodes"])
        assert "ready: 4 ranks" in out, out
    finally:
        held.free()
    assert [r["state"] for r in status(cli, recipe)] == ["ready"] * 4


def test_a_restart_waits_for_the_old_rank_s_leftover_process(tmp_path: Path) -> None:
    """A local rank whose engine left a child of its own in a new session (out of its process
    group, which the supervisor kills): a restart of that rank waits until that child is gone,
    saying how many are left, and goes on once the test ends it."""
    folder = tmp_path / NAME
    demo(folder, entry=["python3", "-c", LEAVER.format(secs=477)])
    cli = sparktui_run(local_env(tmp_path))
    try:
        up = cli("up", str(folder), "--wait")
        assert up.returncode == 0, up.stderr
        restart = subprocess.Popen(
            [sys.executable, "-m", "sparktui", "restart", str(folder), "--rank", "1", "--wait"],
            cwd=ROOT, env=local_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            [start] = until(lambda: waits(tmp_path, "start"))
            [row] = start["nodes"]
            assert row["node"] == "local1" and row["ranks"] == [1] and len(row["left"]) == 1
            assert "; 1 old process left; " in row["text"]
            [pid] = row["left"]
            assert Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00477\x00"
            shown = status(cli, folder)
            assert shown[1]["state"] == "restarting" and shown[1]["cause"] == "memory_wait"
            assert "1 old process left" in shown[1]["detail"]
            os.kill(pid, signal.SIGKILL)
            _out, err = restart.communicate(timeout=90)
        finally:
            if restart.poll() is None:
                restart.kill()
        assert restart.returncode in (0, 1), err  # its peers fall with it (a formed group)
        assert "the old processes gone" in err, err
        assert waits(tmp_path, "end")[0]["nodes"][0]["left"] == []
    finally:
        cli("down", str(folder))
        for proc in Path("/proc").iterdir():  # the sleeps the new ranks left in turn
            try:
                if proc.name.isdigit() and (proc / "cmdline").read_bytes() == b"sleep\x00477\x00":
                    os.kill(int(proc.name), signal.SIGKILL)
            except OSError:
                continue
