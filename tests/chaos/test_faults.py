"""Each fault of the soak's table alone, on one running group (the demo recipe, a rank a node,
``sparktui watch`` following it with its watchdog), with what an operator then sees: what the
watch says, what ``status`` says, and after the fault the soak's checkers (``status --json``
agrees with Docker, every rank's numbered lines once and in order)."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui_testbed import faults as tbf
from tests.chaos import faults as table
from tests.chaos.soak import Soak
from tests.runner import TRACEBACK

pytestmark = pytest.mark.realparts


@pytest.fixture(scope="module")
def soak(testbed: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Soak]:
    s = Soak(testbed, tmp_path_factory.mktemp("faults"), 11)
    s.setup()
    try:
        yield s
        s.finish()  # the watchdog in budget, down leaves nothing, no traceback, no secret
    except BaseException:
        s.abort()
        raise
    finally:
        s.close()


def said_since(soak: Soak, mark: int) -> str:
    return soak.watch.out.read_bytes()[mark:].decode(errors="replace")


def ids(soak: Soak) -> list[str]:
    return [r["container_id"] for r in soak.status()["ranks"]]


def node(soak: Soak, name: str) -> Any:
    return next(n for n in soak.testbed.nodes if n.name == name)


def inject(soak: Soak, kind: str, hold: float, seed: int = 0) -> tuple[str, int]:
    """The fault on a random target of ``seed``; what it hit, and where the watch's words
    about it start."""
    mark = len(soak.watch.out.read_bytes())
    return table.inject(soak, table.BY_KIND[kind], random.Random(seed), hold), mark


def restarts(soak: Soak) -> list[int]:
    return [r["restarts"] for r in soak.status()["ranks"]]


def test_a_killed_rank_is_failed_and_the_watchdog_restarts_the_group(soak: Soak) -> None:
    before, counts = ids(soak), restarts(soak)
    target, mark = inject(soak, "kill-rank", 0, seed=1)
    soak.check()
    said = said_since(soak, mark)
    assert "failed after ready" in said and "watchdog: restarting the whole group" in said, said
    assert "exited with code 137" in said, said
    after = ids(soak)
    assert not set(before) & set(after), (target, before, after)  # every rank replaced
    assert restarts(soak) == [c + 1 for c in counts]


def test_an_sshd_restart_is_survived_with_the_same_containers(soak: Soak) -> None:
    before = ids(soak)
    target, mark = inject(soak, "sshd-restart", 1.0, seed=2)
    soak.check()
    assert f"node {target}: reconnecting" in said_since(soak, mark)
    assert ids(soak) == before


def test_a_cut_node_is_said_unreachable_and_nothing_is_lost_when_it_is_back(soak: Soak) -> None:
    before = ids(soak)
    victim = node(soak, "node2")
    tbf.cut(victim)
    try:
        # the watch follows: status shows its document until the watch misses node2's samples
        # (it is stale), then asks every node itself and names node2, with why
        time.sleep(1)
        end = time.monotonic() + 60
        while True:
            during = soak.cli("status", "--json", timeout=90)
            assert during.returncode == 0, during.stderr
            if "node2" in during.stderr or time.monotonic() > end:
                break
            time.sleep(0.5)
    finally:
        tbf.mend(victim)
    assert "node2" in during.stderr and "10.250." in during.stderr, during.stderr  # named, with why
    rows = json.loads(during.stdout)["ranks"]
    assert rows[2]["state"] != "ready" or rows[2]["health"] is None, rows[2]  # no fresh claim
    soak.check()
    assert ids(soak) == before


def test_a_paused_engine_is_survived_with_the_same_containers(soak: Soak) -> None:
    before = ids(soak)
    target, _mark = inject(soak, "dockerd-pause", 4.0, seed=3)
    soak.check()
    assert ids(soak) == before, target


def test_a_killed_engine_stops_its_rank_and_the_watchdog_restarts_the_group(soak: Soak) -> None:
    before, counts = ids(soak), restarts(soak)
    target, mark = inject(soak, "dockerd-kill", 1.0, seed=4)
    soak.check()
    said = said_since(soak, mark)
    assert f"node {target}: reconnecting" in said, said
    assert "watchdog: restarting the whole group" in said, said
    assert not set(before) & set(ids(soak))
    assert all(r > c for r, c in zip(restarts(soak), counts, strict=True))


def test_a_killed_watch_started_again_catches_up_every_line(soak: Soak) -> None:
    before = ids(soak)
    _target, mark = inject(soak, "watch-kill", 3.0)
    soak.check()  # the lines the ranks wrote while no one watched: in the files, once
    assert "watching demo-chaos" in said_since(soak, mark)
    assert ids(soak) == before


def test_a_restart_from_the_command_line_while_the_watch_follows_is_refused(soak: Soak) -> None:
    before = ids(soak)
    res = soak.cli("restart", "--rank", "1")
    assert res.returncode != 0 and "follows this run; restart from there" in res.stderr, res.stderr
    assert TRACEBACK not in res.stderr, res.stderr
    assert ids(soak) == before


def test_a_rank_restarted_alone_with_the_watch_down_brings_its_group_back(soak: Soak) -> None:
    soak.watch.kill()
    res = soak.cli("restart", "--rank", "1")
    assert res.returncode == 0 and "rank 1 replaced" in res.stderr, res.stderr
    mark = len(soak.watch.out.read_bytes())
    soak.watch.start()
    soak.check()  # rank 1's old container's last lines kept; the group back, by the watchdog
    said = said_since(soak, mark)
    assert "watchdog: restarting the whole group" in said, said


def test_a_full_disk_is_said_and_every_line_is_written_once_there_is_room(soak: Soak) -> None:
    # held 12 s: the filler takes every free page, but a file's last page keeps its room, so a
    # rank's appends (ten ticks a second, some 46 bytes each: a 4 KiB page in about 9 s) fail
    # only once its page is full; held 4 s, CI once met none fail, only the cursors' save (a new
    # file) and "could not save the log cursors"
    _target, mark = inject(soak, "disk-fill", 12.0)
    soak.check()
    said = said_since(soak, mark)
    assert "its log cannot be written" in said and "No space left on device" in said, said
    assert "its log is written again, from where it stopped" in said, said
    assert not (Path(soak.state_top) / table.FILLER).exists()


def test_a_restart_on_a_full_disk_then_the_watch_killed_is_read_right_after(soak: Soak) -> None:
    """Seed 100's sequence, kept: a rank killed while the disk is full, so the watchdog's group
    restart cannot write its events; the watch killed meanwhile; room again, the watch again.
    The restart's event was lost with the process and every reattach judged the new container
    by the old one's last lines ("failed" while Docker ran it): now no container starts before
    its restart is on disk, and the watch started again finds the fall and restarts."""
    filled = table.fill(soak.state_top)
    try:
        running = [c for c in soak.truth.all()[0].get(2, []) if c.running]
        soak.truth.kill(running[0])
        time.sleep(8)  # the watchdog's grace and settle: its restart tried on the full disk
        soak.watch.kill()
    finally:
        (soak.state_top / table.FILLER).unlink()
    assert filled > 0
    mark = len(soak.watch.out.read_bytes())
    soak.watch.start()
    soak.check()
    assert "restarting the whole group" in said_since(soak, mark)


def test_every_container_gone_while_the_watch_is_down_is_a_restart_it_finishes(soak: Soak) -> None:
    """A group restart cut short with no container left (what seed 100 reaches when the
    watchdog's restart removed every container and the disk refused the rest): the watch
    started again takes the recipe's latest run, not "nothing running", and restarts it."""
    soak.watch.kill()
    ranks, _silent = soak.truth.all()
    for containers in ranks.values():
        for c in containers:
            soak.truth.remove(c)
    assert not any(soak.truth.all()[0].values())
    assert {r["state"] for r in soak.status()["ranks"]} == {"pending"}  # nothing runs
    mark = len(soak.watch.out.read_bytes())
    soak.watch.start()
    soak.check()
    said = said_since(soak, mark)
    assert "restarting the whole group" in said and "no container since the group was ready" in said, said


def wait_said(soak: Soak, mark: int, text: str, timeout: float = 60) -> str:
    end = time.monotonic() + timeout
    while text not in (said := said_since(soak, mark)):
        assert time.monotonic() < end, f"{text!r} not said within {timeout:g} s:\n{said}"
        time.sleep(0.05)
    return said


def head_unstartable_in_a_restart(soak: Soak) -> int:
    """A worker killed; as the watchdog's restart makes the new containers (the old ones gone,
    the memory checked), the head's engine killed: rank 0 could not start. Where the watch's
    words start is returned; node0's engine stays down until the caller starts it."""
    mark = len(soak.watch.out.read_bytes())
    running = [c for c in soak.truth.all()[0].get(1, []) if c.running]
    soak.truth.kill(running[0])
    wait_said(soak, mark, "memory checked before the restart")
    tbf.kill_dockerd(node(soak, "node0"))
    wait_said(soak, mark, "rank 0 (node0): could not start")
    return mark


def engine_back(soak: Soak) -> None:
    tbf.start_dockerd(soak.testbed, node(soak, "node0"))
    tbf.wait_dockerd(node(soak, "node0"))


def test_a_rank_that_could_not_start_in_the_watchdogs_restart_is_tried_again(soak: Soak) -> None:
    """Seed 202 (at 635-652 s: a rank killed, its head's engine killed as the group restart
    made the new containers, the console killed twice): the rank that could not start left its
    group booting forever. The watchdog now takes it as a restart that failed, and tries again."""
    mark = head_unstartable_in_a_restart(soak)
    engine_back(soak)
    soak.check()
    said = said_since(soak, mark)
    assert "watchdog: the group restart failed: rank 0 could not start" in said, said
    assert "trying again in 5 s" in said, said


def test_a_rank_that_could_not_start_then_the_watch_killed_is_restarted_by_the_next(soak: Soak) -> None:
    mark = head_unstartable_in_a_restart(soak)
    soak.watch.kill()  # before its 5 s: no one tries again
    engine_back(soak)
    soak.watch.start()
    soak.check()
    said = said_since(soak, mark)
    # rank 0 has no container (or, were one made and not removed, its last state says it could
    # not start): the watch started again finishes the restart
    assert re.search(r"restarting the whole group \(\d+ of 100 in 10m\): rank 0 (has no container"
                     r"|could not start)[^\n]*\(a restart cut short\)", said), said


async def test_the_console_shows_the_truth_after_each_fault_it_follows(soak: Soak) -> None:
    """The console as the run's follower (the watch stopped), its watchdog armed: after each
    fault of the table that hits the cluster or the disk, its ranks table agrees with what
    Docker runs within the bound, and it says what an operator must know of each (the next
    test: the console killed, and the command line's restarts)."""
    import asyncio

    from sparktui.ui.app import SparkApp
    from sparktui.ui.options import ConsoleOptions
    from tests.chaos.soak import TRUTH_BOUND_S, disagree
    from tests.ui.conftest import wait_for

    soak.watch.kill()
    options = ConsoleOptions([soak.recipe.parent], Path(soak.testbed.cluster_file),
                             state_root=soak.state, recipe=soak.slug, remember=False,
                             cursor_blink=False)
    app = SparkApp(options)
    async with app.run_test(size=(160, 48)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 60, "the recipe open on the test cluster")

        def shown() -> str | None:
            rows = [{"rank": r, "state": s.state, "container_id": s.container_id}
                    for r, s in sorted(main.state.ranks.items())]
            latest = soak.recorder.latest
            if latest is None or len(rows) != soak.world:
                return "nothing to compare yet"
            said = disagree(rows, *latest)
            if said is None and any(row["state"] != "ready" for row in rows):
                return "not every rank ready"
            return said

        await wait_for(pilot, lambda: shown() is None, TRUTH_BOUND_S, "the ranks Docker runs")
        # what each fault makes the console say; a short cut or pause (within the links'
        # keepalive, 15 s) is survived with nothing said, nothing failed, the same containers
        for kind, hold, named in (("kill-rank", 0.0, "restarting the whole group"),
                                  ("sshd-restart", 1.0, "reconnecting"),
                                  ("net-cut", 4.0, None),
                                  ("dockerd-pause", 3.0, None),
                                  ("dockerd-kill", 1.0, "restarting the whole group"),
                                  ("disk-fill", 3.0, "its log cannot be written")):
            before = {id(n) for n in main.state.notices}
            containers = [s.container_id for _r, s in sorted(main.state.ranks.items())]
            await asyncio.to_thread(table.inject, soak, table.BY_KIND[kind], random.Random(5), hold)
            await pilot.pause(soak.recorder.period * 3)  # Docker's truth sampled after the fault
            started = time.monotonic()
            await wait_for(pilot, lambda: shown() is None, TRUTH_BOUND_S,
                           f"the console to show Docker's truth after {kind}: {shown()}")
            soak.report.worst_truth_s = max(soak.report.worst_truth_s, time.monotonic() - started)
            notes = " | ".join(n.text for n in main.state.notices if id(n) not in before)
            if named is None:
                assert "failed" not in notes and "restarting" not in notes, (kind, notes)
                assert containers == [s.container_id for _r, s in sorted(main.state.ranks.items())]
            else:
                assert named in notes, (kind, notes)
        await pilot.press("q")
    soak.watch.start()
    soak.check()  # every line of the console's following: once, in order


def test_the_console_killed_or_left_for_a_command_line_restart_shows_the_truth_again(
        soak: Soak) -> None:
    """The console as the follower SIGKILLed and opened again, and left while a rank or the
    group is restarted from the command line (the soak's ``watch-kill`` and ``cli-restart``
    with the console in the watch's place): each time it shows what Docker runs within the
    bound, and every line is in the files once."""
    soak.watch.stop()
    soak.follow_with("console")
    try:
        soak.watch.start()
        for kind, seed in (("watch-kill", 1), ("cli-restart", 2), ("cli-restart", 5)):
            target, mark = inject(soak, kind, 1.0, seed)
            soak.check()  # the console's table against Docker first, then status and the lines
            said = said_since(soak, mark)
            assert "watching demo-chaos in the console" in said, (kind, target, said)
            assert "exit 0" in target or kind == "watch-kill", target
        # seed 200's end (the 30-minute soak): the console killed while its watchdog's restart
        # had removed every container and the disk refused the rest; opened again, it must
        # take the run and finish the restart, not show "not running"
        soak.watch.kill()
        for containers in soak.truth.all()[0].values():
            for c in containers:
                soak.truth.remove(c)
        mark = len(soak.watch.out.read_bytes())
        soak.watch.start()
        soak.check()
        said = said_since(soak, mark)
        assert "restarting the whole group" in said and "no container since the group was ready" in said, said
    finally:
        soak.watch.stop()
        soak.follow_with("watch")
        soak.watch.start()
