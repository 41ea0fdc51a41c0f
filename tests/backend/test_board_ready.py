"""The Board readies ranks by their engine's rule, and asks the other booting ranks again when
one becomes ready (a vLLM headless worker is ready when rank 0 is)."""

from __future__ import annotations

import asyncio

from sparktui.backend.board import SETTLE_S, Board
from sparktui.backend.boot import BootWatch
from sparktui.backend.events import Event, RankChanged
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import build_plan
from sparktui.core.ranks import Cause
from sparktui.core.recipe import load_recipe, load_recipe_text
from tests.conftest import RECIPES

SGLANG_TP4 = """\
engine = "sglang"
docker_image = "sparktui-demo:latest"
model = "sparktui/demo-model"
required_nodes = 4
tensor_parallel_size = 4
[boot]
must_show = [{ pattern = "KV cache ready", ranks = "all" }]
args = "ignore"  # these boots print no dump of their arguments
"""
HEAD_READY = "The server is fired up and ready to roll!"

VLLM_TP4 = """\
engine = "vllm"
docker_image = "sparktui-demo:latest"
model = "sparktui/demo-model"
required_nodes = 4
tensor_parallel_size = 4
"""


def booting_board(recipe_text: str | None = None) -> tuple[Board, list[Event]]:
    recipe = (load_recipe_text(recipe_text) if recipe_text
              else load_recipe(RECIPES / "demo-tp4" / "recipe.toml"))
    cluster = local_cluster(4)
    events: list[Event] = []
    board = Board(build_plan(recipe, cluster), cluster.nodes, events.append)
    for info in board.ranks:
        for state in ("creating", "booting"):
            board.set_state(info, state)
    return board, events


def line(board: Board, rank: int, text: str) -> None:
    board.checks.feed(rank, [(1, text)])
    board.apply_checks(board.ranks[rank])


def every_rank_ready(board: Board) -> None:
    """The head's ready line, then each worker's probe answering 200 (SGLang's workers)."""
    line(board, 0, HEAD_READY)
    for info in board.ranks[1:]:
        board.set_health(info, 200)


def states(board: Board) -> list[str]:
    return [info.state for info in board.ranks]


def test_vllm_headless_workers_become_ready_with_the_head() -> None:
    board, events = booting_board(VLLM_TP4)
    for info in board.ranks[1:]:
        board.set_health(info, None)  # headless: nothing answers
    assert states(board) == ["booting"] * 4
    line(board, 0, "(APIServer pid=1) INFO:     Application startup complete.")
    assert states(board) == ["ready"] * 4
    assert board.changed.is_set()
    readied = [e.rank.rank for e in events
               if isinstance(e, RankChanged) and e.rank.state == "ready"]
    assert readied == [0, 1, 2, 3]


def test_vllm_a_worker_that_failed_stays_failed() -> None:
    board, _ = booting_board(VLLM_TP4)
    board.set_state(board.ranks[2], "failed", Cause("exited", 137))
    line(board, 0, "Application startup complete.")
    assert states(board) == ["ready", "ready", "failed", "ready"]


def test_sglang_workers_wait_for_the_head_line_then_follow_it() -> None:
    board, _ = booting_board()
    board.set_health(board.ranks[1], 200)
    board.set_health(board.ranks[2], 503)
    board.set_health(board.ranks[3], None)
    assert states(board) == ["booting"] * 4  # a worker's 200 alone is not ready before the head
    line(board, 0, "The server is fired up and ready to roll!")
    assert states(board) == ["ready", "ready", "booting", "ready"]
    board.set_health(board.ranks[2], 200)
    assert states(board) == ["ready"] * 4


async def test_a_worker_line_still_on_its_way_counts_when_the_boot_ends() -> None:
    """Workers made ready by rank 0 may have lines in flight on their own node's log stream:
    they are asked again ``SETTLE_S`` after rank 0 became ready, and the boot ends (what never
    showed fails) only then."""
    board, _ = booting_board(VLLM_TP4 + '[boot]\nmust_show = [{ pattern = "KV cache", ranks = "all" }]\n')
    for rank in (0, 1, 3):
        line(board, rank, "GPU KV cache size: 65,536 tokens")
    waiting = asyncio.create_task(BootWatch(board).wait(timeout=5))
    line(board, 0, "Application startup complete.")
    assert states(board) == ["ready", "booting", "booting", "booting"]
    await asyncio.sleep(SETTLE_S / 5)
    assert not waiting.done() and not board.checks.finished
    line(board, 2, "GPU KV cache size: 65,536 tokens")  # rank 2's stream was behind
    assert await waiting
    assert states(board) == ["ready"] * 4
    assert board.checks.finished == {0, 1, 2, 3}
    kv = next(c for c in board.checks.checks if c.pattern == "KV cache")
    assert board.checks.overall(kv) == "passed"


async def test_a_boot_whose_check_waits_for_a_line_ends_when_the_line_comes() -> None:
    """Every rank ready (workers by their probe, a moment after rank 0's line) while a worker's
    line is still on its way through its node's log stream: the boot ends when it comes, and
    its check passes; ``wait`` returns only then."""
    board, _ = booting_board(SGLANG_TP4)
    for rank in (0, 1, 2):
        line(board, rank, "KV cache ready: #tokens=1000")
    waiting = asyncio.create_task(BootWatch(board).wait(timeout=5))
    every_rank_ready(board)
    assert states(board) == ["ready"] * 4
    assert board.boot_ending and not board.checks.finished
    await asyncio.sleep(0)
    assert not waiting.done()
    line(board, 3, "KV cache ready: #tokens=1000")
    assert not board.boot_ending and board.checks.finished == {0, 1, 2, 3}
    assert await waiting
    kv = next(c for c in board.checks.checks if c.pattern == "KV cache ready")
    assert board.checks.overall(kv) == "passed"


async def test_a_boot_whose_checks_all_passed_ends_with_the_last_rank_ready() -> None:
    board, _ = booting_board(SGLANG_TP4)
    for rank in range(4):
        line(board, rank, "KV cache ready: #tokens=1000")
    every_rank_ready(board)
    assert not board.boot_ending and board.checks.finished == {0, 1, 2, 3}
    assert board.changed.is_set()


async def test_a_line_that_never_comes_fails_its_check_settle_s_after_ready() -> None:
    board, _ = booting_board(SGLANG_TP4)
    for rank in (0, 1, 2):
        line(board, rank, "KV cache ready: #tokens=1000")
    waiting = asyncio.create_task(BootWatch(board).wait(timeout=5))
    every_rank_ready(board)
    assert board.boot_ending
    assert await waiting  # every rank ready; the check's verdict is the caller's to report
    kv = next(c for c in board.checks.checks if c.pattern == "KV cache ready")
    assert board.checks.overall(kv) == "failed" and board.checks.finished == {0, 1, 2, 3}


async def test_a_rank_that_fails_while_the_boot_waits_for_a_line_ends_the_wait() -> None:
    board, _ = booting_board(SGLANG_TP4)
    waiting = asyncio.create_task(BootWatch(board).wait(timeout=5, grace=0.1))
    every_rank_ready(board)
    assert board.boot_ending
    board.set_state(board.ranks[2], "failed", Cause("exited", 1))
    assert not board.boot_ending
    assert not await waiting
