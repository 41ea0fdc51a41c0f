"""A planted defect, for proving the soak's checkers can fail: ``python -m tests.chaos.plant
ARGS`` is ``sparktui ARGS`` with a follower that skips the first line it reads after resuming
from a cursor (a reconnect, a restart of the watch). Test-only: nothing in sparktui imports it."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sparktui.backend.runtime import LogChunk
from sparktui.backend.runtimes.docker import DockerRuntime

_logs = DockerRuntime.logs


async def _skipping(self: DockerRuntime, container_id: str, cursor: str | None,
                    follow: bool = True, secrets: Sequence[str] = ()) -> AsyncIterator[LogChunk]:
    skip = cursor is not None
    async for chunk in _logs(self, container_id, cursor, follow, secrets):
        if skip and chunk.lines:
            skip = False
            chunk = dataclasses.replace(chunk, lines=chunk.lines[1:])
        yield chunk


def main(argv: list[str]) -> Any:
    DockerRuntime.logs = _skipping  # type: ignore[method-assign]
    from sparktui.cli import main as sparktui

    return sparktui(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
