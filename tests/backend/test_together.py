"""``together``: what gather does, but no job outlives the call (cancelled or failed)."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.backend.together import together


async def test_results_in_order_and_nothing_for_nothing() -> None:
    async def after(seconds: float, value: int) -> int:
        await asyncio.sleep(seconds)
        return value

    assert await together(after(0.03, 1), after(0.01, 2), after(0.02, 3)) == [1, 2, 3]
    assert await together() == []


async def test_a_cancelled_call_waits_for_every_job_s_clean_up() -> None:
    """A job's clean-up (a node command killed and waited for) takes time after its cancel:
    the call ends after it, where gather ends at the first job cancelled."""
    cleaned: list[str] = []

    async def job(name: str, clean_up_s: float) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(clean_up_s)
            cleaned.append(name)
            raise

    call = asyncio.create_task(together(job("quick", 0.0), job("slow", 0.2)))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert sorted(cleaned) == ["quick", "slow"]

    # gather, for contrast: it is done while the slow job is still cleaning up
    cleaned.clear()
    gathered = asyncio.ensure_future(asyncio.gather(job("quick", 0.0), job("slow", 0.2)))
    await asyncio.sleep(0.05)
    gathered.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gathered
    assert cleaned == ["quick"]
    await asyncio.sleep(0.3)


async def test_a_failing_job_lets_the_others_finish_and_its_error_is_raised() -> None:
    finished: list[str] = []

    async def fails(seconds: float, why: str) -> None:
        await asyncio.sleep(seconds)
        raise ValueError(why)

    async def works() -> None:
        await asyncio.sleep(0.1)
        finished.append("works")

    with pytest.raises(ValueError, match="first in order"):
        await together(fails(0.05, "first in order"), works(), fails(0.01, "second in order"))
    assert finished == ["works"]
