"""Whether a run with no container left is a restart to finish or a run taken down."""

from __future__ import annotations

from sparktui.core.restarts import cut_short


def ev(*kinds: str) -> list[dict[str, object]]:
    return [{"kind": k} for k in kinds]


def test_a_restart_after_ready_with_no_down_is_cut_short() -> None:
    assert cut_short(ev("up", "ready", "restart"), "group")
    assert cut_short(ev("up", "ready", "watchdog"), "group")
    assert cut_short(ev("up", "ready"), "group")  # every container lost after ready


def test_a_down_after_the_last_restart_is_a_run_taken_down() -> None:
    assert not cut_short(ev("up", "ready", "restart", "down"), "group")
    assert cut_short(ev("up", "ready", "down", "restart"), "group")  # restarted after a down


def test_never_ready_or_no_policy_is_not_finished_by_a_watchdog() -> None:
    assert not cut_short(ev("up", "restart"), "group")
    assert not cut_short(ev(), "group")
    assert not cut_short(ev("up", "ready", "restart"), "off")
