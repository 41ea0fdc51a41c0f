"""The rank state machine: every allowed move, every refused one, the readiness rule, the order
of failures and what "has a container" means."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from sparktui.core.cluster import local_cluster
from sparktui.core.ranks import (
    SETTLED,
    TRANSITIONS,
    IllegalTransition,
    RankInfo,
    RankState,
    all_ready,
    all_settled,
    first_failures,
    ready_now,
)

STATES: tuple[RankState, ...] = get_args(RankState)
NODE = local_cluster(1).nodes[0]


def rank(state: RankState = "pending", n: int = 0, **kw: object) -> RankInfo:
    info = RankInfo(n, NODE, **kw)  # type: ignore[arg-type]
    info.state = state
    return info


def test_every_state_has_its_moves() -> None:
    assert set(TRANSITIONS) == set(STATES)
    for moves in TRANSITIONS.values():
        assert moves <= set(STATES)


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(STATES, STATES)))
def test_each_move_is_allowed_or_refused(src: RankState, dst: RankState) -> None:
    info = rank(src)
    if src == dst:
        assert info.move(dst) is False  # same state, same detail: nothing to announce
        assert info.move(dst, "new detail") is True  # a new detail is news
    elif dst in TRANSITIONS[src]:
        assert info.move(dst, "why") is True
        assert (info.state, info.detail) == (dst, "why")
    else:
        with pytest.raises(IllegalTransition, match=f"{src} -> {dst}"):
            info.move(dst)
        assert info.state == src


def test_the_life_of_a_rank() -> None:
    info = rank()
    for state in ("staging", "creating", "booting", "ready", "restarting", "creating", "booting",
                  "failed", "creating", "booting", "stopped"):
        assert info.move(state)  # type: ignore[arg-type]
    assert info.settled


def test_a_ready_rank_cannot_boot_again_without_a_restart() -> None:
    with pytest.raises(IllegalTransition):
        rank("ready").move("booting")


def test_failed_at_is_the_first_failure_and_clears_on_a_new_boot() -> None:
    info = rank("booting")
    info.move("failed", "line 3: Traceback", when=100.0)
    info.move("failed", "exited with code 1", when=200.0)
    assert info.failed_at == 100.0  # the first failure is the cause
    info.move("creating")
    assert info.failed_at is None


def test_ready_rule() -> None:
    head, worker = rank("booting", 0), rank("booting", 1)
    # the head: its ready line alone, or health 200 once the line appeared
    assert ready_now(head, line_seen=True, head_line_seen=True)
    head.health = 200
    assert not ready_now(head, line_seen=False, head_line_seen=False)
    # a worker: health 200 (it prints no ready line)
    assert not ready_now(worker, line_seen=False, head_line_seen=True)
    worker.health = 200
    assert ready_now(worker, line_seen=False, head_line_seen=False)
    worker.health = 503
    assert not ready_now(worker, line_seen=False, head_line_seen=True)
    # only a booting rank becomes ready
    for state in set(STATES) - {"booting"}:
        assert not ready_now(rank(state, 1, health=200), line_seen=True, head_line_seen=True)


def test_first_failures_orders_by_when_it_happened() -> None:
    a, b, c = rank("booting", 0), rank("booting", 1), rank("booting", 2)
    b.move("failed", when=10.0)
    a.move("failed", when=12.0)
    assert [r.rank for r in first_failures([a, b, c])] == [1, 0]
    assert [s.rank for s in first_failures([a.snapshot(), b.snapshot(), c.snapshot()])] == [1, 0]


def test_has_container_until_down_removes_it() -> None:
    info = rank("pending")
    assert not info.has_container
    info.container_id = "c0ffee"
    info.move("creating")
    assert info.has_container
    info.removed = True  # down stopped and removed it
    assert not info.has_container and not info.snapshot().has_container
    info.move("booting")
    info.move("restarting")
    assert info.has_container  # a relaunch gives it a container again


def test_observe_takes_the_container_as_truth() -> None:
    info = rank("ready")
    info.observe("c1", running=False, exit_code=137)
    assert (info.state, info.exit_code, info.detail) == ("failed", 137, "exited with code 137")
    info.observe("c1", running=False, exit_code=0)
    assert info.state == "stopped"
    info.observe("c2", running=True, exit_code=None)
    assert (info.state, info.container_id) == ("booting", "c2")


def test_group_predicates() -> None:
    ranks = [rank("ready", 0), rank("ready", 1)]
    assert all_ready(ranks) and all_settled(ranks)
    ranks[1].state = "booting"
    assert not all_ready(ranks) and not all_settled(ranks)
    assert {"ready", "failed", "stopped"} == SETTLED


def test_new_launch_forgets_the_last_run() -> None:
    info = rank("stopped", exit_code=1, health=200, container_id="c", removed=True)
    info.last_lines.append("x")
    info.new_launch()
    assert (info.exit_code, info.health, info.container_id, info.removed) == (None, None, None, False)
    assert not info.last_lines
