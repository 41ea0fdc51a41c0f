"""The boot budget and waiting for a boot to end: every rank ready, or one failed, or the
recipe's ``[boot] timeout`` spent."""

from __future__ import annotations

import asyncio
import time

from sparktui.backend.board import Board
from sparktui.core.ranks import BOOTING, Cause, all_ready, all_settled

TICK_S = 0.5


class BootWatch:
    def __init__(self, board: Board) -> None:
        self.board = board
        self.closed = False

    async def timeout_loop(self) -> None:
        """Fail what still boots when the budget is spent; ends once every rank settled."""
        board = self.board
        budget = board.plan.boot.timeout_s
        while not self.closed:
            await asyncio.sleep(TICK_S)
            if board.boot_started is None:
                continue
            board.watch_stall()
            if time.monotonic() - board.boot_started > budget:
                stall = board.stall  # its rank failed first: when it went quiet
                for info in board.ranks:
                    if info.state in BOOTING:
                        stalled = stall is not None and info.rank == stall.rank
                        board.set_state(info, "failed", Cause(
                            "boot_timeout", seconds=budget,
                            text=stall.sentence if stall is not None and stalled else None),
                            info.last_line_at if stalled else None)
                        board.end_boot(info)
                board.changed.set()
                return
            if all_settled(board.ranks):
                return

    async def wait(self, timeout: float | None = None, grace: float = 3.0) -> bool:
        """Until every rank is ready (True) or one failed / the time ran out (False). After a
        failure, the rest of the TP group gets ``grace`` seconds to report how it fell over."""
        board = self.board

        async def settled() -> None:
            while not all_settled(board.ranks) or board.boot_ending:
                board.changed.clear()
                if any(r.state == "failed" for r in board.ranks):
                    end = time.monotonic() + grace
                    while time.monotonic() < end and not all_settled(board.ranks):
                        await asyncio.sleep(0.1)
                    return
                await board.changed.wait()
        try:
            await asyncio.wait_for(settled(), timeout)
        except asyncio.TimeoutError:
            return False
        return all_ready(board.ranks)
