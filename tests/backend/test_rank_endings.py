"""How a rank's end is told when its container's exit code is gone: removed by ``down`` before
the follower asked (the end stays "removed by down"), or removed from outside while it ran
(said so): never "exit code None"."""

from __future__ import annotations

from sparktui.backend.follower import LogFollower
from sparktui.backend.runtime import ContainerState
from sparktui.core.ranks import Cause
from tests.backend.test_board import board


def test_a_rank_stopped_by_down_keeps_its_words_when_the_code_is_gone() -> None:
    b, _ = board()
    follower = LogFollower(b, {}, {})
    gone, ended = b.ranks[0], b.ranks[1]
    for info in (gone, ended):
        info.stopping = True
        b.set_state(info, "stopped", Cause("removed_by_down"))
    follower._exited(gone, ContainerState(id="c0", name="r0", status="missing"))
    follower._exited(ended, ContainerState(id="c1", name="r1", status="exited", exit_code=143))
    assert (gone.state, gone.detail) == ("stopped", "removed by down")
    assert (ended.state, ended.detail, ended.exit_code) == ("stopped", "exit code 143", 143)


def test_a_rank_whose_container_vanished_says_so() -> None:
    b, _ = board()
    follower = LogFollower(b, {}, {})
    vanished, crashed = b.ranks[2], b.ranks[3]
    vanished.last_lines.append("serving")
    crashed.last_lines.append("NCCL error")
    follower._exited(vanished, ContainerState(id="c2", name="r2", status="missing"))
    follower._exited(crashed, ContainerState(id="c3", name="r3", status="exited", exit_code=1))
    assert (vanished.state, vanished.detail) == (
        "failed", "its container was removed outside sparktui: serving")
    assert (crashed.state, crashed.detail) == ("failed", "exited with code 1: NCCL error")


def test_the_detail_of_a_rank_that_exited_quotes_a_little_of_each_last_line() -> None:
    """Its last lines may be 32 KiB pieces of a longer line: the detail is a sentence."""
    b, _ = board()
    follower = LogFollower(b, {}, {})
    info = b.ranks[0]
    info.last_lines.extend(["a" * 32768, "\u21aa " + "b" * 32768, "\u21aa tail"])
    follower._exited(info, ContainerState(id="c0", name="r0", status="exited", exit_code=1))
    assert info.detail == ("exited with code 1: " + "a" * 300 + " | \u21aa " + "b" * 298
                           + " | \u21aa tail")
