"""The memory guard's loop on this machine's shells (the local cluster's nodes): a reading a
second while ranks boot, every telemetry interval once they are ready, a warning said once,
a reading command that dies started again; and the stop on a formed group, named first."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

from sparktui.backend.board import Board
from sparktui.backend.events import Event, MemoryChanged, Notice
from sparktui.backend.memguard import MemoryWatch
from sparktui.backend.nodeshell import LocalShell, NodeShell
from sparktui.backend.runtimes.processes import LocalRuntime
from sparktui.core.cluster import local_cluster
from sparktui.core.memguard import restore_causes
from sparktui.core.meminfo import MEM_END
from sparktui.core.plan import MemoryPlan, build_plan
from sparktui.core.ranks import Cause
from sparktui.core.recipe import load_recipe
from sparktui.core.runstore import RunStore
from tests.conftest import RECIPES

GiB = 1 << 30


def guarded(tmp: Path, floor: int, stop_at: int | None,
            nodes: int = 4) -> tuple[MemoryWatch, Board, list[Event]]:
    cluster = local_cluster(nodes)
    plan = build_plan(load_recipe(RECIPES / "demo-tp4" / "recipe.toml"), cluster)
    plan = dataclasses.replace(plan, memory=MemoryPlan(floor, stop_at, 2 * GiB, 300.0))
    seen: list[Event] = []
    board = Board(plan, cluster.nodes, seen.append)
    board.run = RunStore(tmp).create(plan.recipe_slug)
    for info in board.ranks:
        info.move("creating")
        info.move("booting")
    shells: dict[str, NodeShell] = {n.name: LocalShell(n) for n in cluster.nodes}
    runtime = LocalRuntime(tmp / "local")
    watch = MemoryWatch(board, shells, {n.name: runtime for n in cluster.nodes}, seen.append,
                        interval=2.0)
    return watch, board, seen


async def until(what: Callable[[], bool], timeout: float, why: str) -> None:
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, f"timed out after {timeout:g} s waiting for {why}"
        await asyncio.sleep(0.02)


def notices(seen: list[Event], has: str) -> list[str]:
    return [e.text for e in seen if isinstance(e, Notice) and has in e.text]


def meminfo(available: int, total: int = 128 * GiB) -> str:
    return f"MemTotal: {total // 1024} kB\nMemAvailable: {available // 1024} kB\nno-psi\n"


async def test_every_second_while_booting_then_every_interval_and_a_warning_said_once(
        tmp_path: Path) -> None:
    watch, board, seen = guarded(tmp_path, floor=1 << 50, stop_at=None)  # every node is low
    started = time.monotonic()
    task = asyncio.create_task(watch.loop())
    try:
        # rates from the clock, not fixed sleeps: a loaded machine delays a reading, never
        # makes one come sooner
        await until(lambda: watch.readings >= 4 * 2, 20, "two readings of each node")
        booting, took = watch.readings, time.monotonic() - started
        assert watch.interval == 1.0
        assert booting <= 4 * (took + 1.5), (booting, took)  # at most one a second a node
        for info in board.ranks:
            board.set_state(info, "ready")
        await until(lambda: watch.interval == 2.0, 10, "the ready interval")  # the next look
        ready_from, ready_at = watch.readings, time.monotonic()  # at the states restarts each
        await until(lambda: watch.readings - ready_from >= 4 * 2, 30, "two ready readings a node")
        got, took = watch.readings - ready_from, time.monotonic() - ready_at
        assert took >= 1.5, took  # the second reading of each node came an interval later
        assert got <= 4 * (took / 2.0 + 1.5), (got, took)  # at most one every 2 s a node
    finally:
        watch.closed = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    low = notices(seen, "memory low: ")
    assert sorted(t.split(" left on ")[1].split(",")[0] for t in low) == [
        "local0", "local1", "local2", "local3"]  # once per node, however many readings
    assert all("under the floor of " in t for t in low)
    assert len([e for e in seen if isinstance(e, MemoryChanged)]) == 4
    assert board.run is not None
    assert len([e for e in board.run.events() if e["kind"] == "memory-low"]) == 4


async def test_a_reading_command_that_dies_is_said_once_and_started_again(tmp_path: Path) -> None:
    watch, _board, seen = guarded(tmp_path, floor=GiB, stop_at=None)
    task = asyncio.create_task(watch.loop())
    try:
        await asyncio.sleep(1.5)
        assert watch.readings >= 1
        loops = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                 and _is_reading_loop(p, os.getpid())]
        assert len(loops) == 4, loops  # one per node
        os.kill(loops[0], signal.SIGKILL)
        before = watch.readings
        end = time.monotonic() + 8
        while not notices(seen, "cannot be read") and time.monotonic() < end:
            await asyncio.sleep(0.1)
        await asyncio.sleep(2.5)  # an interval later, started again
        loops = [p for p in Path("/proc").iterdir() if p.name.isdigit()
                 and _is_reading_loop(p, os.getpid())]
        assert len(loops) == 4, "the reading command was not started again"
        assert watch.readings > before
    finally:
        watch.closed = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    said = notices(seen, "memory cannot be read")
    assert len(said) == 1 and re.fullmatch(
        r"memory guard: local\d's memory cannot be read \(the reading command ended\); "
        r"trying again", said[0]), said


def _is_reading_loop(proc: Path, parent: int) -> bool:
    try:
        ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        return ppid == parent and MEM_END.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


async def test_the_stop_fails_the_nodes_rank_first_and_its_group_with_it_once(tmp_path: Path) -> None:
    watch, board, seen = guarded(tmp_path, floor=4 * GiB, stop_at=2 * GiB)
    for info in board.ranks:
        board.set_state(info, "ready")
        info.container_id = f"c{info.rank}"
    board.formed = True
    watch.reading("local1", meminfo(6 * GiB), 10.0)
    watch.reading("local1", meminfo(int(1.8 * GiB)), 11.0)
    watch.reading("local2", meminfo(GiB), 11.5)  # the launch is stopped already: not again
    await watch.close()  # the stop's containers (none running here) are done with
    r = board.ranks
    assert r[1].cause == Cause("memory", text="1.8 GiB left on local1, falling 4.2 GiB/s")
    assert [i.state for i in r] == ["failed"] * 4
    assert [i.cause.code for i in r if i.cause] == ["group_fell", "memory", "group_fell", "group_fell"]
    assert all(i.cause is not None and i.cause.rank == 1 for i in r if i.rank != 1)
    assert r[1].detail == "memory: 1.8 GiB left on local1, falling 4.2 GiB/s"
    assert notices(seen, "stopped before the host wedges") == [
        "memory: 1.8 GiB left on local1, falling 4.2 GiB/s, under stop_at 2.0 GiB: rank 1 on "
        "local1 stopped before the host wedges"]
    assert board.run is not None
    events = board.run.events()
    stops = [e for e in events if e["kind"] == "memory-stop"]
    assert len(stops) == 1 and stops[0]["node"] == "local1" and stops[0]["ranks"] == [1]
    assert stops[0]["available"] == int(1.8 * GiB) // 1024 * 1024
    # another process attaches (``status``): the containers found exited, the causes come back
    for info in r:
        info.state, info.cause = "stopped", Cause("exited", 0)
    restore_causes(r, events)
    assert [i.cause.code for i in r if i.cause] == ["group_fell", "memory", "group_fell", "group_fell"]
    assert r[1].detail == "memory: 1.8 GiB left on local1, falling 4.2 GiB/s"
    r[2].container_id = "a-new-one"  # rank 2 restarted since: not touched
    r[2].state, r[2].cause = "booting", None
    restore_causes(r, events)
    assert (r[2].state, r[2].cause) == ("booting", None)
