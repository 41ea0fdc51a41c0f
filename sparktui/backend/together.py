"""Awaitables run at once, none outliving the call.

``asyncio.gather`` returns as soon as one child raises or is cancelled: the others go on, and a
node command of theirs can outlive the caller (``up`` refused with the fit still reading a node;
then ``asyncio.run`` cancels that child a second time in its clean-up, and its process closes
its pipes after the event loop). ``together`` waits for every child whatever happens, as
Python 3.11's ``TaskGroup`` does, without cancelling the others when one fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def together(*jobs: Awaitable[T]) -> list[T]:
    """Every job's result, in order. When one raises, the others are let finish and the first
    error (in order) is raised; when the call is cancelled, every job is cancelled and waited
    for before the cancellation goes on."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        raise
    errors = [task.exception() for task in tasks if not task.cancelled()]  # each one retrieved
    for error in errors:
        if error is not None:
            raise error
    if any(task.cancelled() for task in tasks):  # cancelled from elsewhere: as gather would
        raise asyncio.CancelledError
    return [task.result() for task in tasks]
