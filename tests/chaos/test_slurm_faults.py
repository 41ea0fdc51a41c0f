"""The soak's faults on the Slurm runtime (``faults.SLURM_TABLE``): the demo recipe's group as
steps of one allocation on the test cluster's Slurm partition, ``sparktui watch`` following it
through the login node with its watchdog; each fault alone with what the watch and ``status``
then say, and the soak's checkers after it (``status --json`` agrees with Docker on each
node, every rank's numbered lines once and in order); then a seeded soak of the whole table on
the same group."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sparktui_testbed as tbm
from sparktui.backend.runtimes.slurm import LABEL_JOB
from sparktui_testbed import faults as tbf
from tests.chaos import faults as table
from tests.chaos.soak import Soak
from tests.chaos.test_faults import ids, inject, node, said_since, wait_said
from tests.realparts.conftest import _unavailable

pytestmark = pytest.mark.realparts

SOAK_FAULTS = 12
SOAK_SECONDS = 200


@pytest.fixture(scope="module")
def soak(testbed: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Soak]:
    if testbed.slurm is None:
        _unavailable("the test cluster has no Slurm")
    s = Soak(testbed, tmp_path_factory.mktemp("slurm-faults"), 21, runtime="slurm")
    s.setup()
    try:
        yield s
        s.finish()  # the watchdog in budget, down leaves no step nor container, no secret
    except BaseException:
        s.abort()
        raise
    finally:
        s.close()


def job(soak: Soak) -> str:
    return str(soak.status()["allocation"].split()[2])


def test_a_killed_slurmd_is_survived_with_the_same_steps_in_the_same_job(soak: Soak) -> None:
    before, allocation = ids(soak), job(soak)
    target, mark = inject(soak, "slurmd-kill", 2.0, seed=1)
    soak.check()
    assert ids(soak) == before and job(soak) == allocation, target
    said = said_since(soak, mark)
    assert "failed" not in said and "restarting" not in said, said


def test_a_killed_rank_is_failed_and_the_watchdog_restarts_the_group(soak: Soak) -> None:
    before, allocation = ids(soak), job(soak)
    target, mark = inject(soak, "kill-rank", 0, seed=2)
    soak.check()
    said = said_since(soak, mark)
    assert "failed after ready" in said and "watchdog: restarting the whole group" in said, said
    after = ids(soak)
    assert not set(before) & set(after), (target, before, after)
    assert job(soak) == allocation  # new steps of the same allocation
    assert all(i.startswith(f"slurm-{allocation}-r") for i in after), after


def test_a_node_set_down_fails_its_rank_first_and_the_group_comes_back_in_a_new_job(
        soak: Soak) -> None:
    allocation = job(soak)
    target, mark = inject(soak, "node-down", 3.0, seed=3)
    rank = int(target.removeprefix("node"))  # a rank a node, in order
    soak.check()
    said = said_since(soak, mark)
    # Slurm ends the allocation: every rank's step is stopped (its engine exits on TERM); the
    # first to end says why (the job's reason: a node down), the others that it failed first
    assert re.search(rf"rank \d: failed · [^\n]*Slurm job {allocation} (is completing|ended"
                     rf"[^\n]*) \(NodeDown\)", said), said
    assert re.search(rf"rank {rank}: failed", said), said
    assert "watchdog: restarting the whole group" in said, said
    again = job(soak)
    assert again != allocation
    assert ids(soak) == [f"slurm-{again}-r{r}-1" for r in range(4)]
    assert tbm.slurm_states(soak.testbed.state_dir)[target].rstrip("*~#") in ("allocated", "mixed")


def test_the_login_nodes_sshd_restarted_is_survived_with_the_same_steps(soak: Soak) -> None:
    before = ids(soak)
    target, mark = inject(soak, "sshd-restart", 1.5, seed=4)
    assert target == "login"
    soak.check()  # every line after the reconnect, once
    # each rank's log comes through the login node: its follower says so, and reconnects
    assert re.search(r"node node\d: reconnecting · login: ", said_since(soak, mark))
    assert ids(soak) == before


def test_a_paused_engine_is_survived_with_the_same_steps(soak: Soak) -> None:
    before = ids(soak)
    target, _mark = inject(soak, "dockerd-pause", 3.0, seed=5)
    soak.check()
    assert ids(soak) == before, target


def test_a_killed_engine_ends_its_rank_and_the_watchdog_restarts_the_group(soak: Soak) -> None:
    before = ids(soak)
    target, mark = inject(soak, "dockerd-kill", 1.0, seed=6)
    soak.check()
    assert "watchdog: restarting the whole group" in said_since(soak, mark)
    assert not set(before) & set(ids(soak)), target


def test_a_step_whose_engine_was_killed_as_the_restart_started_it_is_tried_again(soak: Soak) -> None:
    """Seed 401 (at 1137 s: engines killed as the watchdog's restart started the new steps):
    a step whose ``docker run`` found no engine ended "not running", its group booting forever
    without it. The rank could not start; the watchdog tries the restart again."""
    mark = len(soak.watch.out.read_bytes())
    running = [c for c in soak.truth.all()[0].get(2, []) if c.running]
    soak.truth.kill(running[0])
    wait_said(soak, mark, "memory checked before the restart")
    victim = node(soak, "node1")
    tbf.kill_dockerd(victim)
    try:
        wait_said(soak, mark, "rank 1: failed · could not start")
    finally:
        tbf.start_dockerd(soak.testbed, victim)
        tbf.wait_dockerd(victim)
    soak.check()
    said = said_since(soak, mark)
    assert "watchdog: the group restart failed: rank 1 could not start" in said, said


def test_the_watch_killed_while_its_restart_waits_for_slurm_is_finished_by_the_next(soak: Soak) -> None:
    """Seed 401 (at 719-733 s: node1, then node3 set DOWN, the watch killed while its group
    restart's new job pended): the watch started again found the ranks queued and tried a
    restart every 5 s, each refused ("queued -> restarting"); the job, once given, ran no step."""
    mark = len(soak.watch.out.read_bytes())
    before = job(soak)
    # node3 lost (slurmd and its steps killed, DOWN): it stays out until its slurmd is back
    tbm.stop_slurmd(soak.testbed.state_dir, "node3", down=True, lost=True)
    try:
        wait_said(soak, mark, "(ReqNodeNotAvail")  # the restart's new job waits for node3
        soak.watch.kill()
        soak.watch.start()
        time.sleep(2)
    finally:
        table.resume(soak, "node3")
    soak.check()
    said = said_since(soak, mark)
    assert "(a restart cut short)" in said and "queued -> restarting" not in said, said
    for c in soak.truth.containers("node3"):  # the lost node's own: no epilog ran there
        if not c.running and not c.id.startswith(f"slurm-{job(soak)}-"):
            assert c.id.startswith(f"slurm-{before}-"), c.id
            soak.truth.remove(c)


def test_the_watch_killed_and_a_rank_restarted_from_the_command_line(soak: Soak) -> None:
    before = ids(soak)
    _t, mark = inject(soak, "watch-kill", 2.0)
    soak.check()  # what the ranks wrote while no one watched: in the files, once
    assert ids(soak) == before and "watching demo-chaos-slurm" in said_since(soak, mark)
    target, _mark = inject(soak, "cli-restart", 0, seed=8)
    assert "exit 0" in target, target
    soak.check()
    assert ids(soak) != before


def test_a_restart_from_a_process_that_never_saw_the_removed_attempts_numbers_past_them(
        soak: Soak) -> None:
    """Seed 401 (at 1041 s, after 264 faults): a rank's newest attempts in the job were removed
    (restarts whose steps did not start), and a command-line ``restart --group`` (a process
    that never saw them) took the last attempt ``find`` lists for the newest: each next number
    was taken, and after three "no free attempt number" failed the rank."""
    soak.watch.kill()
    try:
        rid = next(r["container_id"] for r in soak.status()["ranks"] if r["rank"] == 1)
        attempt = int(rid.rsplit("-", 1)[1])
        job_id = rid.split("-")[1]
        labels = next(p for p in Path(soak.testbed.state_dir, "shared").glob(
            f"*/rank1-{attempt}.json.labels") if json.loads(p.read_text())[LABEL_JOB] == job_id)
        owner = labels.stat()
        for n in range(attempt + 1, attempt + 4):  # as a removed attempt's files stay
            for path in (labels.with_name(f"rank1-{n}.json.labels"),
                         labels.with_name(f"rank1-{n}.removed")):
                shutil.copyfile(labels, path)
                os.chown(path, owner.st_uid, owner.st_gid)
        res = soak.cli("restart", "--group", "--wait")
        assert res.returncode == 0, res.stdout + res.stderr
        now = next(r["container_id"] for r in soak.status()["ranks"] if r["rank"] == 1)
        assert now == rid.rsplit("-", 1)[0] + f"-{attempt + 4}", now
    finally:
        soak.watch.start()
    soak.check()


def test_a_full_disk_is_survived_with_the_same_steps(soak: Soak) -> None:
    before = ids(soak)
    target, mark = inject(soak, "disk-fill", 3.0)
    soak.check()
    assert "No space left" in said_since(soak, mark) or "full" in said_since(soak, mark), target
    assert ids(soak) == before


def test_a_seeded_soak_of_the_slurm_table_breaks_no_invariant(soak: Soak) -> None:
    """The same group, now hit by the seed's faults at random (the fixture's finish checks
    ``down`` after them)."""
    soak.check_odds = 0.4
    hit = soak.strike(SOAK_FAULTS, soak.elapsed() + SOAK_SECONDS)
    soak.check()
    soak.report.seconds = soak.elapsed()
    print(soak.report.summary())
    assert len(hit) == SOAK_FAULTS, soak.report.summary()
    assert len({f.kind for f in hit}) >= 5, soak.report.summary()
