"""The rank state machine: every allowed move, every refused one, the readiness rule, the order
of failures and what "has a container" means."""

from __future__ import annotations

import itertools
import json
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.cluster import local_cluster
from sparktui.core.engines import Engine, ReadyFacts, engine
from sparktui.core.ranks import (
    CAUSE_CODES,
    CAUSE_EVENT,
    SETTLED,
    TRANSITIONS,
    Cause,
    IllegalTransition,
    RankInfo,
    RankState,
    all_ready,
    all_settled,
    first_failures,
    ready_now,
    restore_said,
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
        assert info.move(dst, Cause("held", text="new detail")) is True  # a new detail is news
    elif dst in TRANSITIONS[src]:
        assert info.move(dst, Cause("held", text="why")) is True
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
    info.move("failed", Cause("fatal_line", line_no=3, text="Traceback"), when=100.0)
    info.move("failed", Cause("exited", 1), when=200.0)
    assert info.failed_at == 100.0  # the first failure is the cause
    info.move("creating")
    assert info.failed_at is None


SGLANG, VLLM = engine("sglang"), engine("vllm")


def ready(info: RankInfo, eng: Engine, *, line: bool = False, head_line: bool = False,
          head_ready: bool = False) -> bool:
    return ready_now(info, eng, line_seen=line, head_line_seen=head_line, head_ready=head_ready)


def test_sglang_head_is_ready_by_its_line() -> None:
    head = rank("booting", 0)
    assert not ready(head, SGLANG)
    head.health = 200
    assert not ready(head, SGLANG)  # a healthy API without the line is still loading
    assert ready(head, SGLANG, line=True, head_line=True)


def test_sglang_worker_is_ready_by_health_after_the_head_line() -> None:
    worker = rank("booting", 1, health=200)
    assert not ready(worker, SGLANG)  # its health server answers before the group is whole
    assert ready(worker, SGLANG, head_line=True)
    worker.health = 503
    assert not ready(worker, SGLANG, head_line=True, head_ready=True)


def test_sglang_worker_answering_no_http_is_ready_with_the_head() -> None:
    worker = rank("booting", 1, health=None)
    # not probed yet is not "answers nothing" (a reattach replays rank 0's line before any probe)
    assert not ready(worker, SGLANG, head_line=True, head_ready=True)
    worker.probed = True  # asked, and nothing answered
    assert not ready(worker, SGLANG, head_line=True)
    assert ready(worker, SGLANG, head_line=True, head_ready=True)
    worker.move("restarting")
    assert not worker.probed  # a new launch is asked afresh


def test_vllm_head_is_ready_by_application_startup_complete() -> None:
    head = rank("booting", 0)
    assert not ready(head, VLLM)
    assert ready(head, VLLM, line=True, head_line=True)  # nothing probed yet: the line decides
    head.health = 200
    assert ready(head, VLLM, line=True, head_line=True)
    head.health = 503  # the API answers but does not serve the model
    assert not ready(head, VLLM, line=True, head_line=True)


def test_vllm_headless_worker_is_ready_when_running_and_the_head_is_ready() -> None:
    worker = rank("booting", 2)
    assert not ready(worker, VLLM, head_line=True)
    assert ready(worker, VLLM, head_line=True, head_ready=True)
    assert not VLLM.ready(ReadyFacts(rank=2, running=False, health=None, line_seen=False,
                                     head_ready=True, head_line_seen=True))


@pytest.mark.parametrize("eng", [SGLANG, VLLM], ids=["sglang", "vllm"])
def test_a_rank_that_exited_is_failed_not_ready(eng: Engine) -> None:
    info = rank("booting", 1, health=200)
    info.observe("c1", running=False, exit_code=137)
    assert (info.state, info.detail) == ("failed", "exited with code 137")
    assert not ready(info, eng, line=True, head_line=True, head_ready=True)
    # only a booting rank becomes ready
    for state in set(STATES) - {"booting"}:
        for r in (0, 1):
            assert not ready(rank(state, r, health=200), eng, line=True, head_line=True,
                             head_ready=True)


def test_a_rank_found_not_running_without_an_exit_code_says_so() -> None:
    info = rank("booting", 0)
    info.observe("c0", running=False, exit_code=None)
    assert (info.state, info.detail) == ("stopped", "not running (no exit code)")


def test_a_new_launch_starts_the_restart_count_over() -> None:
    """The count is the run's: a console that attaches later counts the run's restart events,
    so the one that launched a new run after restarts in the last must not carry them over."""
    info = rank("failed", 2)
    info.restarts, info.exit_code, info.health = 3, 137, 503
    info.new_launch()
    assert (info.restarts, info.exit_code, info.health, info.container_id) == (0, None, None, None)


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


@pytest.mark.parametrize(("cause", "sentence", "reason"), [
    (Cause("boot_timeout", seconds=120), "boot timed out after 120 s", "boot timed out after 120 s"),
    (Cause("fatal_line", line_no=9, text="NCCL error: unhandled"), "line 9: NCCL error: unhandled",
     "line 9"),
    (Cause("exited", 1, text="a | b"), "exited with code 1: a | b", "exited with code 1"),
    (Cause("exited", 1, text=""), "exited with code 1", "exited with code 1"),
    (Cause("exited", 137), "exited with code 137", "exited with code 137"),
    (Cause("no_exit_code", text="x"), "exited (no exit code): x", "exited (no exit code)"),
    (Cause("not_running"), "not running (no exit code)", "not running (no exit code)"),
    (Cause("removed_outside", text="x"), "its container was removed outside sparktui: x",
     "its container was removed outside sparktui"),
    (Cause("group_fell", rank=2), "rank 2 failed first", "rank 2 failed first"),
    (Cause("group_fell", rank=2, before=Cause("fatal_line", line_no=9, text="timeout: 1")),
     "rank 2 failed first; line 9: timeout: 1", "rank 2 failed first; line 9"),
    (Cause("peer_restarted", rank=0), "rank 0 was restarted alone", "rank 0 was restarted alone"),
    (Cause("could_not_start", text="port: busy"), "could not start: port: busy", "could not start"),
    (Cause("image_missing", text="no image x; run sparktui image sync demo"),
     "could not start: no image x; run sparktui image sync demo", "could not start"),
    (Cause("staging", text="node1: disk full"), "staging: node1: disk full", "staging"),
    (Cause("stopped_exit", 143), "exit code 143", "exit code 143"),
    (Cause("removed_by_down"), "removed by down", "removed by down"),
    (Cause("held", text="held by alice: since 9"), "held by alice: since 9", "held by alice: since 9"),
])
def test_a_cause_is_a_code_its_sentence_and_reason_derived(cause: Cause, sentence: str,
                                                           reason: str) -> None:
    """The sentences are the ones the board used to write; the reason is what a toast names
    (the sentence up to its first colon, without cutting a node's words that hold one)."""
    assert (cause.sentence, cause.reason) == (sentence, reason)
    info = rank("booting")
    info.cause = cause
    assert info.detail == sentence and info.snapshot().reason == reason


def test_a_cause_masks_the_nodes_words_only() -> None:
    cause = Cause("group_fell", rank=1, before=Cause("fatal_line", line_no=3, text="key=s3cret"))
    masked = cause.masked(lambda t: t.replace("s3cret", "***"))
    assert masked.sentence == "rank 1 failed first; line 3: key=***"
    assert masked.before is not None and masked.before.code == "fatal_line"


LEAVES = st.builds(Cause, st.sampled_from(sorted(CAUSE_CODES)), st.none() | st.integers(-255, 255),
                   st.none() | st.integers(0, 63), st.none() | st.integers(1, 10**6),
                   st.none() | st.floats(0, 1e4, allow_nan=False), st.none() | st.text(max_size=40))
FELL = st.builds(Cause, st.just("group_fell"), rank=st.integers(0, 7), before=LEAVES)
CAUSES = LEAVES | FELL | st.builds(Cause, st.just("group_fell"), rank=st.integers(0, 7), before=FELL)


@given(cause=CAUSES)
def test_a_cause_comes_back_whole_from_the_runs_events(cause: Cause) -> None:
    """What the follower said of a rank is kept in its events as JSON and read back the same."""
    data = json.loads(json.dumps(cause.to_json()))
    assert Cause.from_json(data) == cause
    assert Cause.from_json(data) is not None and Cause.from_json(data).sentence == cause.sentence  # type: ignore[union-attr]


@pytest.mark.parametrize("junk", [
    None, "exited", [], {}, {"code": "nope"}, {"code": "exited", "exit_code": "137"},
    {"code": "exited", "exit_code": True}, {"code": "group_fell", "rank": 1.5},
    {"code": "exited", "text": 3}, {"code": "group_fell", "rank": 1, "before": {"code": "x"}},
    {"code": "boot_timeout", "seconds": "120"},
])
def test_a_cause_not_as_to_json_writes_it_is_none(junk: object) -> None:
    assert Cause.from_json(junk) is None


def _failed(n: int, container: str, cause: Cause) -> RankInfo:
    info = rank("failed", n)
    info.container_id, info.cause = container, cause
    return info


def test_an_attach_says_what_the_follower_said_of_the_containers_it_saw_fail() -> None:
    """Rank 2 killed, the rest fell with it (named by ``name_first`` after the fact): an attach
    that found only exit codes says what the follower said, for the same containers only."""
    killed = Cause("exited", 137, text="demo tick 35")
    fell = Cause("group_fell", rank=2)
    events = [
        {"kind": "up"},
        {"kind": "rank", "rank": 0, "state": "failed", "container_id": "c0",
         "why": Cause("group_fell", rank=1).to_json()},
        {"kind": "rank", "rank": 1, "state": "failed", "container_id": "c1",
         "why": Cause("exited", 1).to_json()},
        {"kind": "rank", "rank": 2, "state": "failed", "container_id": "c2", "why": killed.to_json()},
        {"kind": CAUSE_EVENT, "rank": 0, "container_id": "c0", "why": fell.to_json()},
        {"kind": CAUSE_EVENT, "rank": 1, "container_id": "c1", "why": fell.to_json()},
        {"kind": "rank", "rank": 3, "state": "failed", "container_id": "c3", "why": fell.to_json()},
    ]
    ranks = [_failed(0, "c0", Cause("exited", 4)), _failed(1, "c1", Cause("exited", 4)),
             _failed(2, "c2", Cause("exited", 137)), _failed(3, "other", Cause("exited", 4))]
    restore_said(ranks, events)
    assert [r.detail for r in ranks] == ["rank 2 failed first", "rank 2 failed first",
                                         "exited with code 137: demo tick 35", "exited with code 4"]
    # launched again since, restarted (a state that is not failed), or an event of another kind
    for later in ({"kind": "up"}, {"kind": "rank", "rank": 2, "state": "restarting",
                                   "container_id": "c2", "why": None}):
        again = [_failed(2, "c2", Cause("exited", 137))]
        restore_said(again, [*events, later])
        assert again[0].detail == "exited with code 137"
    booting = rank("booting", 2)
    booting.container_id = "c2"
    restore_said([booting], events)
    assert booting.cause is None
