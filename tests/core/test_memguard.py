"""The memory guard's judgement over sequences of readings: the levels, a warning said once
until it clears, the stop once per launch, the fall rate and the sentence."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.memguard import CLEAR_MARGIN, MemoryGuard, NodeGuard
from sparktui.core.meminfo import NodeMemory

GiB = 1 << 30
TOTAL = 128 * GiB


def mem(available: float, some: float | None = None, full: float | None = None) -> NodeMemory:
    return NodeMemory(TOTAL, int(available), some, full)


def test_a_fall_through_floor_and_stop_at_warns_once_then_stops_once_with_the_figures() -> None:
    guard = NodeGuard("spark2", floor=4 * GiB, stop_at=2 * GiB)
    seen = [guard.feed(mem(a * GiB), t) for t, a in enumerate([10, 7, 4.5, 3.9, 3.5, 1.8, 1.2, 1.0])]
    assert [v.level for v in seen] == ["ok", "ok", "ok", "low", "low", "stop", "stop", "stop"]
    assert [v.action for v in seen] == [None, None, None, "warn", None, "stop", None, None]
    stop = seen[5]
    # over the last 5 s (readings at 0 and 5 s): 10 GiB - 1.8 GiB in 5 s
    assert stop.rate == (10 * GiB - int(1.8 * GiB)) / 5
    assert stop.sentence == "1.8 GiB left on spark2, falling 1.6 GiB/s"
    assert stop.threshold == "under stop_at 2.0 GiB"
    assert stop.to_json()["available"] == int(1.8 * GiB)


def test_the_first_reading_has_no_rate_and_steady_memory_says_so() -> None:
    guard = NodeGuard("n0", floor=4 * GiB, stop_at=None)
    first = guard.feed(mem(3 * GiB), 0.0)
    assert (first.rate, first.sentence, first.action) == (None, "3.0 GiB left on n0", "warn")
    steady = guard.feed(mem(3 * GiB + 1000), 1.0)
    assert steady.sentence == "3.0 GiB left on n0, steady" and steady.action is None
    rising = guard.feed(mem(3.5 * GiB), 2.0)
    assert rising.trend == "rising 256.0 MiB/s"


def test_without_stop_at_it_never_stops_and_psi_is_shown_where_the_kernel_has_it() -> None:
    guard = NodeGuard("n0", floor=4 * GiB, stop_at=None)
    v = guard.feed(mem(0.1 * GiB, some=12.5, full=3.25), 0.0)
    assert v.level == "low" and v.action == "warn"
    assert v.pressure == "memory pressure some 12.5 %, full 3.2 % in the last 10 s"
    assert guard.feed(mem(0.1 * GiB), 1.0).pressure == ""


def test_a_node_at_its_floor_clears_only_past_the_margin() -> None:
    guard = NodeGuard("n0", floor=4 * GiB, stop_at=1 * GiB)
    assert guard.feed(mem(4 * GiB - 1), 0).action == "warn"
    assert guard.feed(mem(4 * GiB + CLEAR_MARGIN // 2), 1).action is None  # still low
    assert guard.feed(mem(4 * GiB - 1), 2).action is None
    assert guard.feed(mem(4 * GiB + CLEAR_MARGIN), 3).action == "clear"
    assert guard.feed(mem(3 * GiB), 4).action == "warn"


def test_the_stop_acts_once_per_launch_on_any_node() -> None:
    guard = MemoryGuard(["a", "b"], floor=4 * GiB, stop_at=1 * GiB)
    assert guard.feed("a", mem(0.5 * GiB), 0).action == "stop"
    guard.stop_all()
    assert guard.feed("b", mem(0.5 * GiB), 0).action == "warn"  # the launch is stopped already
    assert guard.feed("a", mem(8 * GiB), 1).action == "clear"
    assert guard.feed("a", mem(0.5 * GiB), 2).action == "warn"
    guard.arm()  # a new launch
    assert guard.feed("a", mem(0.4 * GiB), 3).action == "stop"


def test_a_clock_that_goes_back_starts_the_rate_over() -> None:
    guard = NodeGuard("n0", floor=GiB, stop_at=None)
    guard.feed(mem(10 * GiB), 100.0)
    assert guard.feed(mem(9 * GiB), 5.0).rate is None


readings = st.lists(st.tuples(st.floats(0.05, 3.0), st.integers(0, 16 * GiB)), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(readings, st.integers(1, 8 * GiB), st.one_of(st.none(), st.integers(0, 8 * GiB)))
def test_any_sequence_warns_once_until_cleared_and_stops_at_most_once(
        seq: list[tuple[float, int]], floor: int, stop_at: int | None) -> None:
    if stop_at is not None and stop_at >= floor:
        stop_at = floor - 1
    guard = NodeGuard("n", floor=floor, stop_at=stop_at)
    t, said, stops = 0.0, False, 0
    history: list[tuple[float, int]] = []
    for gap, avail in seq:
        t += gap
        history.append((t, avail))
        v = guard.feed(mem(avail), t)
        # the level is the reading's against the thresholds
        assert (v.level == "stop") == (stop_at is not None and avail < stop_at)
        if avail < floor:
            assert v.level != "ok"
        if v.action == "stop":
            stops += 1
            assert v.level == "stop"
        if v.action in ("warn", "stop"):
            assert not said or v.action == "stop"
            said = True
        elif v.action == "clear":
            assert said and v.level == "ok"
            said = False
        if v.level == "ok":
            assert not said  # an ok reading after a warning is its clearing
        # the rate: from the reading at or before the window's start to this one
        old = [h for h in history if t - h[0] >= guard.window]
        first = old[-1] if old else history[0]
        if first[0] < t:
            assert v.rate is not None and abs(v.rate - (first[1] - avail) / (t - first[0])) < 1e-3 * GiB
        else:
            assert v.rate is None
    assert stops <= 1
