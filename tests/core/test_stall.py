"""Which booting rank went quiet first, and what the others printed since."""

from __future__ import annotations

from sparktui.core.stall import Quiet, find_stall

NCCL = "NCCL INFO comm 0x7f3a5c0002 rank 2 nranks 4 cudaDev 0 - Init COMPLETE"
GRAPHS = "Capturing CUDA graphs (bs=16) 40%"


def test_one_rank_silent_while_the_others_print_is_named_with_its_last_line() -> None:
    quiet = [Quiet(0, 1000.0, GRAPHS), Quiet(1, 999.0, GRAPHS), Quiet(2, 870.0, NCCL),
             Quiet(3, 1000.5, GRAPHS)]
    stall = find_stall(quiet, 1000.5, 120)
    assert stall is not None and stall.rank == 2 and not stall.every
    assert stall.sentence == (f"rank 2 silent for 2m10s after `{NCCL}`; "
                              f"ranks 0, 1 and 3 went on to `{GRAPHS}`")
    assert stall.to_json()["silent_s"] == 130.5


def test_nothing_is_said_before_the_stall_time_nor_when_all_print() -> None:
    quiet = [Quiet(0, 1000.0, GRAPHS), Quiet(2, 900.0, NCCL)]
    assert find_stall(quiet, 1010.0, 120) is None
    assert find_stall([Quiet(0, 1000.0, GRAPHS), Quiet(1, 1001.0, GRAPHS)], 1100.0, 120) is None


def test_every_rank_silent_names_the_first_to_go_quiet() -> None:
    quiet = [Quiet(0, 800.0, "Load weight end."), Quiet(1, 700.0, NCCL), Quiet(2, 790.0, None)]
    stall = find_stall(quiet, 1000.0, 120)
    assert stall is not None and stall.every and stall.rank == 1 and stall.ranks == (1, 2, 0)
    assert stall.sentence == f"every rank silent; rank 1 went quiet first, 5m ago, after `{NCCL}`"


def test_the_others_are_grouped_by_their_last_line_newest_first_and_long_lines_cut() -> None:
    long = "x" * 300
    quiet = [Quiet(0, 999.0, GRAPHS), Quiet(1, 998.0, long), Quiet(2, 500.0, None),
             Quiet(3, 1000.0, GRAPHS)]
    stall = find_stall(quiet, 1000.0, 120)
    assert stall is not None
    assert stall.sentence == (f"rank 2 silent for 8m20s without a line; ranks 0 and 3 went on to "
                              f"`{GRAPHS}`; rank 1 to `{'x' * 97}...`")


def test_a_rank_booting_alone_stalls_on_its_own() -> None:
    stall = find_stall([Quiet(1, 0.0, NCCL)], 200.0, 120)
    assert stall is not None and stall.sentence == f"rank 1 silent for 3m20s after `{NCCL}`"
    assert find_stall([Quiet(1, 0.0, NCCL)], 200.0, 0) is None  # stall = 0: never said
