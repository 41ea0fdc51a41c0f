"""``smoke --n N --concurrency C``'s scheduling and summary: never more than C requests at once,
each outcome in the order sent, a failed one kept beside the others (which go on), and the
percentiles of the first tokens."""

from __future__ import annotations

import asyncio

from sparktui.backend.smoke import SmokeOutcome, SmokeResult, SmokeSummary, percentile, smoke_many
from sparktui.core.errors import SparkError


def test_n_requests_c_at_once_in_the_order_sent() -> None:
    at_once = most = 0
    calls = 0

    async def one() -> SmokeResult:
        nonlocal at_once, most, calls
        calls += 1
        mine = calls
        at_once += 1
        most = max(most, at_once)
        await asyncio.sleep(0.01 * (6 - mine))  # the first sent end last
        at_once -= 1
        if mine == 3:
            raise SparkError("smoke: the third one failed")
        return SmokeResult("m", "", mine, mine / 1000, 50.0, 0.1)

    ended: list[int] = []

    def each(i: int, outcome: SmokeOutcome) -> None:
        ended.append(i)

    outcomes = asyncio.run(smoke_many(one, 5, 2, each))
    assert most == 2
    assert [o.tokens if isinstance(o, SmokeResult) else str(o) for o in outcomes] == [
        1, 2, "smoke: the third one failed", 4, 5]
    assert sorted(ended) == [0, 1, 2, 3, 4] and ended != [0, 1, 2, 3, 4]  # as they ended
    summary = SmokeSummary.of(outcomes, 1.5)
    assert not summary.ok and summary.failed == 1 and summary.tokens == 12
    assert summary.sentence() == ("1 of 5 requests failed, p50 first token 3 ms, p95 first token 5 ms, "
                                  "decode p50 50.0 tok/s, 12 tokens in 1.50 s")


def test_percentiles_interpolate_between_the_closest_two() -> None:
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) == 4.8
    all_failed = SmokeSummary.of([SparkError("x"), SparkError("y")], 0.2)
    assert all_failed.sentence() == "2 of 2 requests failed, 0 tokens in 0.20 s" and not all_failed.ok
