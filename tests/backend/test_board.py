"""The Board's group rules, without a cluster: a formed group falls with its first rank, and
the rank named first is the one whose end came first, whatever order the ends are noticed in."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterator

from sparktui.backend.board import Board
from sparktui.backend.events import Event, RankChanged
from sparktui.backend.follower import LogFollower
from sparktui.backend.runtime import ContainerState
from sparktui.core.cluster import Cluster, local_cluster
from sparktui.core.plan import Plan, build_plan
from sparktui.core.ranks import Cause, first_failures
from sparktui.core.recipe import load_recipe
from tests.conftest import RECIPES


@functools.cache
def demo_plan() -> tuple[Plan, Cluster]:
    cluster = local_cluster(4)
    return build_plan(load_recipe(RECIPES / "demo-tp4" / "recipe.toml"), cluster), cluster


def board() -> tuple[Board, list[Event]]:
    plan, cluster = demo_plan()
    seen: list[Event] = []
    b = Board(plan, cluster.nodes, seen.append)
    for info in b.ranks:
        info.move("creating")
        info.move("booting")
    return b, seen


def formed() -> tuple[Board, list[Event]]:
    b, seen = board()
    for info in b.ranks:
        b.set_state(info, "ready")
    b.formed = True
    return b, seen


def test_a_group_that_never_formed_loses_only_the_rank() -> None:
    b, _ = board()
    b.set_state(b.ranks[2], "failed", Cause("exited", 1), when=10.0)
    assert [r.state for r in b.ranks] == ["booting", "booting", "failed", "booting"]


def test_a_formed_group_falls_with_its_first_rank() -> None:
    b, seen = formed()
    b.set_state(b.ranks[2], "failed", Cause("exited", 137), when=10.0)
    assert [r.state for r in b.ranks] == ["failed"] * 4
    assert [r.detail for r in b.ranks] == ["rank 2 failed first", "rank 2 failed first",
                                           "exited with code 137", "rank 2 failed first"]
    assert b.ranks[2] is sorted(b.ranks, key=lambda r: r.failed_at or 0)[0]
    assert not b.formed
    snaps = [e.rank for e in seen if isinstance(e, RankChanged)]
    assert snaps[-1].state == "failed"


def test_the_first_to_end_is_named_whatever_order_they_are_noticed_in() -> None:
    b, _ = formed()
    # rank 0 noticed first (its NCCL watchdog fired at 12.0), rank 2 really ended at 10.0
    b.set_state(b.ranks[0], "failed", Cause("fatal_line", line_no=9, text="Watchdog caught collective operation timeout"), when=12.0)
    assert b.ranks[2].detail == "rank 0 failed first"
    b.failed_on_its_own(b.ranks[2], Cause("exited", 137), 10.0)
    assert b.ranks[2].detail == "exited with code 137"
    assert b.ranks[0].detail == "rank 2 failed first; line 9: Watchdog caught collective operation timeout"
    assert b.ranks[1].detail == b.ranks[3].detail == "rank 2 failed first"
    # a later end changes nothing
    b.failed_on_its_own(b.ranks[3], Cause("exited", 4), 13.0)
    assert b.ranks[3].detail == "rank 2 failed first"
    assert min(b.ranks, key=lambda r: r.failed_at or 0).rank == 2


def test_restarting_one_rank_of_a_formed_group() -> None:
    b, _ = formed()
    b.set_state(b.ranks[1], "restarting")
    assert [r.state for r in b.ranks] == ["failed", "restarting", "failed", "failed"]
    assert b.ranks[0].detail == "rank 1 was restarted alone"


def test_a_silent_end_within_a_moment_of_a_peers_fatal_line_is_the_cause() -> None:
    b, _ = formed()
    # rank 0 printed the lost collective at 12.0; docker recorded killed rank 2's end at 12.3
    b.checks.feed(0, [(9, "Watchdog caught collective operation timeout: WorkNCCL(...)")])
    b.set_state(b.ranks[0], "failed", Cause("fatal_line", line_no=9, text="Watchdog caught collective operation timeout"), when=12.0)
    b.failed_on_its_own(b.ranks[2], Cause("exited", 137), 12.3)
    assert b.ranks[2].detail == "exited with code 137"
    assert b.ranks[0].detail.startswith("rank 2 failed first; line 9")
    assert min(b.ranks, key=lambda r: r.failed_at or 0).rank == 2
    # a silent end long after is not the cause
    b2, _ = formed()
    b2.checks.feed(0, [(9, "Watchdog caught collective operation timeout: WorkNCCL(...)")])
    b2.set_state(b2.ranks[0], "failed", Cause("fatal_line", line_no=9, text="Watchdog caught collective operation timeout"), when=12.0)
    b2.failed_on_its_own(b2.ranks[2], Cause("exited", 137), 15.0)
    assert b2.ranks[2].detail == "rank 0 failed first"


# -- who is named first does not hang on the order things are noticed in ----------------------
# Each rank's lines come before its exit (one follower per rank reads its stream, then asks
# how it ended); between ranks, any order. Stamps are the nodes' and lag under load: a peer's
# report of the lost group may carry an earlier stamp than the crashed rank's own traceback.

WATCHDOG = ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
            "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.")
TCPSTORE = ("[rank{rank}]: Failed to check the \"should dump\" flag on TCPStore at 10.0.0.1:29500, "
            "with error: Failed to recv, got 0 bytes. Connection was likely closed.")
NCCL = ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled system error, "
        "NCCL version 2.27.3")


def stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def line(b: Board, rank: int, no: int, text: str, at: float) -> None:
    """What the follower does with a line: the checks, then what they change."""
    updates = b.checks.feed(rank, [(no, text)])
    b.checks_changed(updates)
    b.apply_checks(b.ranks[rank], {no: stamp(at)})


def ended(b: Board, rank: int, code: int, at: float) -> None:
    LogFollower(b, {})._exited(b.ranks[rank], ContainerState(f"c{rank}", f"r{rank}", "exited",
                                                             exit_code=code, finished_at=stamp(at)))


Step = Callable[[Board], None]


def orders(per_rank: dict[int, list[Step]]) -> Iterator[list[Step]]:
    """Every interleaving of the ranks' steps that keeps each rank's own order."""
    queues = [seq for seq in per_rank.values() if seq]
    if not queues:
        yield []
        return
    for i, seq in enumerate(queues):
        rest = {j: (q[1:] if j == i else q) for j, q in enumerate(queues)}
        for tail in orders(rest):
            yield [seq[0], *tail]


T = 1_800_000_000.0


def test_a_crash_during_boot_is_named_first_in_every_order() -> None:
    """Rank 1 prints its traceback and exits; rank 0 and the workers report the lost group, one
    of them stamped before rank 1's own line (the demo's ``--demo-fail-rank 1``)."""
    per_rank: dict[int, list[Step]] = {
        1: [lambda b: line(b, 1, 40, NCCL, T + 0.30), lambda b: ended(b, 1, 3, T + 0.31)],
        0: [lambda b: line(b, 0, 50, WATCHDOG, T + 0.10), lambda b: ended(b, 0, 4, T + 0.12)],
        2: [lambda b: line(b, 2, 30, TCPSTORE.format(rank=2), T + 0.20), lambda b: ended(b, 2, 4, T + 0.22)],
    }
    seen = 0
    for steps in orders(per_rank):
        b, _ = board()
        for step in steps:
            step(b)
        failed = first_failures(b.ranks)
        assert [r.rank for r in failed][:1] == [1], [(r.rank, r.failed_at, r.detail) for r in failed]
        assert b.ranks[1].detail.startswith("line 40: RuntimeError: NCCL error")
        assert b.ranks[0].detail.startswith("line 50: [Rank 0] Watchdog")  # its own words kept
        seen += 1
    assert seen == 90  # 6! / 2^3 interleavings


def test_a_killed_rank_of_a_formed_group_is_named_first_in_every_order() -> None:
    """Rank 1 is killed (it says nothing); rank 0's watchdog and the workers' TCPStore report
    the lost group and exit 4, their exits reaped a moment before rank 1's."""
    per_rank: dict[int, list[Step]] = {
        1: [lambda b: ended(b, 1, 137, T + 0.20)],
        0: [lambda b: line(b, 0, 50, WATCHDOG, T + 0.05), lambda b: ended(b, 0, 4, T + 0.10)],
        2: [lambda b: line(b, 2, 30, TCPSTORE.format(rank=2), T + 0.06), lambda b: ended(b, 2, 4, T + 0.15)],
        3: [lambda b: line(b, 3, 31, TCPSTORE.format(rank=3), T + 0.07), lambda b: ended(b, 3, 4, T + 0.16)],
    }
    seen = 0
    for steps in orders(per_rank):
        b, _ = formed()
        for step in steps:
            step(b)
        assert [r.state for r in b.ranks] == ["failed"] * 4
        first = first_failures(b.ranks)[0]
        assert first.rank == 1, [(r.rank, r.failed_at, r.detail) for r in b.ranks]
        assert b.ranks[1].detail == "exited with code 137"
        assert b.ranks[2].detail.startswith("rank 1 failed first")
        assert b.ranks[3].detail.startswith("rank 1 failed first")
        assert b.ranks[0].detail.startswith("rank 1 failed first")
        seen += 1
    assert seen == 630  # 7! / (2! 2! 2!) interleavings
