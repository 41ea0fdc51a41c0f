"""The console's state without Textual: failures merged into one toast, warnings reported once
until they clear, node links, the notice log."""

from __future__ import annotations

from sparktui.backend.events import NodeChanged, NodeTelemetry
from sparktui.core.ranks import Cause, RankSnapshot
from sparktui.core.runstore import RunStore
from sparktui.ui.console_state import MAX_NOTICES, ConsoleState


def snap(rank: int, state: str, cause: Cause | None = None, failed_at: float | None = None) -> RankSnapshot:
    detail = cause.sentence if cause is not None else ""
    return RankSnapshot(rank, f"spark{rank + 1}", state, detail, failed_at=failed_at,  # type: ignore[arg-type]
                        cause=cause)


def test_a_group_that_falls_over_is_one_toast_naming_the_first() -> None:
    state = ConsoleState(lambda: 0.0)
    assert state.rank_changed(snap(0, "booting")) is None
    said = state.rank_changed(snap(2, "failed", Cause("exited", 1, text="NCCL error"), failed_at=12.0))
    assert said == "rank 2 (spark3) failed: exited with code 1: NCCL error"
    state.rank_changed(snap(1, "failed", Cause("fatal_line", line_no=40, text="Traceback (most recent call last):"),
                           failed_at=10.0))
    assert state.rank_changed(snap(1, "failed", Cause("exited", 1, text="again"), failed_at=10.0)) is None  # already failed
    assert state.take_failures() == "ranks 1, 2 failed; first rank 1: line 40 (r, then g: restart the group)"
    assert state.take_failures() is None


def test_one_failure_is_named_alone() -> None:
    state = ConsoleState(lambda: 0.0)
    state.rank_changed(snap(3, "failed", Cause("boot_timeout", seconds=20)))
    assert state.take_failures() == "rank 3 failed: boot timed out after 20 s"


def test_warnings_once_until_they_clear() -> None:
    state = ConsoleState(lambda: 0.0)

    def sample(*warnings: tuple[str, str]) -> NodeTelemetry:
        return NodeTelemetry("spark1", "ok", warnings=list(warnings))

    low = ("low-memory", "head memory low: 6.0 GiB available (warn below 8.0 GiB)")
    lower = ("low-memory", "head memory low: 5.0 GiB available (warn below 8.0 GiB)")
    assert state.new_warnings(sample(low)) == [f"spark1: {low[1]}"]
    assert state.new_warnings(sample(lower)) == []  # the same warning, other numbers
    assert state.new_warnings(sample()) == []  # cleared
    assert state.new_warnings(sample(lower)) == [f"spark1: {lower[1]}"]  # back: said again


def test_node_links() -> None:
    state = ConsoleState(lambda: 0.0)
    assert state.node_changed(NodeChanged("spark1", "connected")) is None
    assert state.node_changed(NodeChanged("spark1", "reconnecting", "timed out")) == (
        "warning", "node spark1 reconnecting: timed out")
    assert state.node_changed(NodeChanged("spark1", "reconnecting", "timed out")) is None
    assert state.node_changed(NodeChanged("spark1", "connected")) == ("info", "node spark1 connected again")


def test_runs_and_containers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    state = ConsoleState(lambda: 0.0)
    run = RunStore(tmp_path).create("demo")
    assert state.run_started(run) and not state.run_started(run)
    assert state.run_id == run.id
    assert not state.has_container(0)
    state.rank_changed(RankSnapshot(0, "spark1", "stopped", "removed by down", "c0ffee"))
    assert not state.has_container(0)  # the snapshot says so; no text is matched
    state.rank_changed(RankSnapshot(0, "spark1", "ready", container_id="c1", has_container=True))
    assert state.has_container(0)
    state.open(None)
    assert state.run is None and not state.ranks


def test_the_notice_log_is_bounded() -> None:
    state = ConsoleState(lambda: 0.0)
    for i in range(MAX_NOTICES + 5):
        state.note("info", str(i))
    assert len(state.notices) == MAX_NOTICES and state.notices[-1].text == str(MAX_NOTICES + 4)


def test_the_toast_names_the_cause_not_a_cut_sentence() -> None:
    """The reason is the cause's short form: a fatal line that holds a colon is not cut at it,
    and a rank named first after the fact says so before its own reason."""
    state = ConsoleState(lambda: 0.0)
    state.rank_changed(snap(0, "failed", Cause("group_fell", rank=2, before=Cause(
        "fatal_line", line_no=9, text="RuntimeError: NCCL timeout")), failed_at=11.0))
    state.rank_changed(snap(2, "failed", Cause("removed_outside", text="x: y"), failed_at=10.0))
    assert state.take_failures() == ("ranks 0, 2 failed; first rank 2: its container was removed "
                                     "outside sparktui (r, then g: restart the group)")
    state.rank_changed(snap(1, "failed", Cause("group_fell", rank=2, before=Cause(
        "fatal_line", line_no=9, text="RuntimeError: NCCL timeout"))))
    assert state.take_failures() == "rank 1 failed: rank 2 failed first; line 9"
    state.rank_changed(RankSnapshot(3, "spark4", "failed", "made by hand: no cause"))
    assert state.take_failures() == "rank 3 failed: made by hand: no cause"
