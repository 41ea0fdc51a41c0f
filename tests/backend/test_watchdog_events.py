"""What the watchdog reads in a run's events on starting: the ranks a group restart could not
start, which a watchdog killed meanwhile did not try again."""

from __future__ import annotations

from sparktui.core.restarts import could_not_start


def test_the_ranks_whose_latest_state_is_could_not_start() -> None:
    events = [
        {"kind": "rank", "rank": 0, "state": "failed", "cause": "could_not_start"},
        {"kind": "rank", "rank": 1, "state": "failed", "cause": "could_not_start"},
        {"kind": "rank", "rank": 1, "state": "booting", "cause": None},  # started since
        {"kind": "notice", "rank": 2, "cause": "could_not_start"},  # not a rank's state
        {"kind": "rank", "rank": 3, "state": "failed", "cause": "exited"},
    ]
    assert could_not_start(events) == [0]
    assert could_not_start([]) == []
