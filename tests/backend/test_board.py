"""The Board's group rules, without a cluster: a formed group falls with its first rank, and
the rank named first is the one whose end came first, whatever order the ends are noticed in."""

from __future__ import annotations

from sparktui.backend.board import Board
from sparktui.backend.events import Event, RankChanged
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import build_plan
from sparktui.core.ranks import Cause
from sparktui.core.recipe import load_recipe
from tests.conftest import RECIPES


def board() -> tuple[Board, list[Event]]:
    recipe = load_recipe(RECIPES / "demo-tp4" / "recipe.toml")
    cluster = local_cluster(4)
    plan = build_plan(recipe, cluster)
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
