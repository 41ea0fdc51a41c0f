"""The restart's wait, its pure part: the figures the ranks show, when a node is back, the
launch's baseline read back from the run's events, and the script that finds what an old
container left on its node (its id checked, then passed as an argument)."""

from __future__ import annotations

import subprocess

import pytest

from sparktui.core.memwait import (
    BASELINE_EVENT,
    LEFT_END,
    WAIT_EVENT,
    NodeWait,
    baselines_of,
    leftover_argv,
    open_wait,
    parse_leftovers,
    rank_tree,
    timeout_text,
)
from sparktui.core.procs import ProcStat, proc_stat
from sparktui.core.runstore import utc_now

GIB = 1 << 30


def test_the_waiting_text_has_the_figures() -> None:
    w = NodeWait("node1", int(19.2 * GIB), 23 * GIB, 2 * GIB, (11, 12, 13), 12.4)
    assert w.text == "node1: 19.2 GiB available of 21.0 GiB needed; 3 old processes left; 12 s"
    assert w.figures == ("node1: 19.2 GiB available of 21.0 GiB needed (23.0 GiB at launch "
                         "less 2.0 GiB); 3 old processes left")
    assert not w.memory_back and not w.processes_gone and not w.done
    assert w.to_json()["needed"] == 21 * GIB


def test_back_within_the_margin_but_one_process_left() -> None:
    w = NodeWait("node1", 22 * GIB, 23 * GIB, 2 * GIB, (7,), 3)
    assert w.memory_back and not w.done
    assert w.text == "node1: 22.0 GiB available, back to 21.0 GiB or more; 1 old process left; 3 s"
    assert w.figures == ("node1: 22.0 GiB available, back to 21.0 GiB or more (23.0 GiB at "
                         "launch less 2.0 GiB); 1 old process left")
    assert NodeWait("node1", 22 * GIB, 23 * GIB, 2 * GIB, (), 3).done


def test_no_baseline_or_no_reading_is_said_and_not_waited_on() -> None:
    none = NodeWait("n", 5 * GIB, None, 2 * GIB, None, 1, left_why="slurm")
    assert none.done and none.text == "n: no memory reading from before the launch: not waited on; 1 s"
    unread = NodeWait("n", None, 9 * GIB, GIB, (), 1, why="n: connection lost")
    assert unread.done and "could not be read, not waited on (n: connection lost)" in unread.text


def test_the_timeout_names_what_was_missing() -> None:
    late = NodeWait("node2", GIB, 4 * GIB, GIB, (), 30)
    fine = NodeWait("node1", 4 * GIB, 4 * GIB, GIB, (), 30)
    text = timeout_text([fine, late], 30)
    assert text.startswith("the restart waited 30 s (restart_wait)")
    assert "node2: 1.0 GiB available of 3.0 GiB needed" in text and "node1" not in text


def test_the_baseline_is_the_last_launch_s() -> None:
    events = [
        {"kind": BASELINE_EVENT, "nodes": [{"node": "a", "available": 1, "total": 9}]},
        {"kind": "restart", "rank": 0},
        {"kind": BASELINE_EVENT, "nodes": [{"node": "b", "available": 5, "total": 9},
                                           {"node": "c", "available": "x", "total": 9}]},
    ]
    found = baselines_of(events)
    assert list(found) == ["b"] and found["b"].available == 5
    assert baselines_of([{"kind": "up"}]) == {}


def test_an_open_wait_is_the_last_event_if_it_is_fresh() -> None:
    row = {"node": "a", "text": "a: waiting", "ranks": [0, 1]}
    start = {"kind": WAIT_EVENT, "phase": "start", "ts": utc_now(), "nodes": [row]}
    import time
    assert open_wait([start], time.time()) == {0: "a: waiting", 1: "a: waiting"}
    assert open_wait([start], time.time() + 60) == {}  # its process went away
    assert open_wait([start, {**start, "phase": "end"}], time.time()) == {}


def test_a_container_id_must_be_hex() -> None:
    assert leftover_argv("0123456789ab")[-1] == "0123456789ab"
    for bad in ("0123456789aB; reboot", "$(id)", "abc", "g" * 64):
        with pytest.raises(ValueError):
            leftover_argv(bad)


def test_the_leftover_script_runs_in_sh_and_finds_nothing_for_an_unknown_id() -> None:
    out = subprocess.run(leftover_argv("f" * 64), capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert parse_leftovers(out.stdout) == []
    assert parse_leftovers(f"12\n7\n{LEFT_END}\n") == [7, 12]
    with pytest.raises(ValueError):
        parse_leftovers("12\n")  # cut short


def test_a_rank_s_tree_keeps_the_child_that_left_its_group() -> None:
    stat = "41 (py (x) y) S 1 41 41 0 -1 4194560 0 0 0 0 1 2 0 0 20 0 1 0 777 0 0"
    assert proc_stat(stat) == ProcStat("S", 1, 41, 777)
    stats = {41: ProcStat("S", 1, 41, 10), 42: ProcStat("S", 41, 41, 11),
             43: ProcStat("S", 42, 43, 12),  # a new session, under the rank
             44: ProcStat("S", 1, 44, 13),  # a stranger
             45: ProcStat("S", 1, 41, 14)}  # in the group, its parent gone
    assert rank_tree(stats, 41) == {41: 10, 42: 11, 43: 12, 45: 14}
