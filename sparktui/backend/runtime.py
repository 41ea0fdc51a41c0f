"""What one node's runtime does with ranks, whatever runs them (a Docker container, a local
process, a Slurm step): the per-node contract every runtime of ``backend/runtimes`` hands out
(``Runtime.containers``), and the states, log chunks and errors it speaks in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from sparktui.core.dockerview import short_id
from sparktui.core.errors import SparkError
from sparktui.core.rankspec import ContainerSpec

Status = Literal["created", "running", "restarting", "exited", "dead", "missing"]


@dataclass(frozen=True)
class ContainerState:
    """What the runtime reports about one rank's container (or process)."""

    id: str
    name: str
    status: Status
    exit_code: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    image_id: str | None = None
    created_at: str | None = None  # RFC 3339 UTC: since when it is there (whose run, since when)
    queued: str | None = None
    """Not started yet: its scheduler holds it back, and why (Slurm's reason); None: started."""
    oom_killed: bool = False
    """Its runtime says the kernel's out-of-memory killer ended it (Docker's State.OOMKilled): a
    hint, the kernel's message is the proof (``backend.kmsg``)."""
    lost: str | None = None
    """Why it ended with no exit code, in its runtime's words (Slurm: the allocation ended under
    it, and why); None: nothing more to say."""
    unstarted: bool = False
    """Its runtime could not start it (Slurm: the step's ``docker run`` failed, its engine away):
    the rank could not start, which a watchdog's restart tries again."""

    @property
    def running(self) -> bool:
        return self.status in ("running", "restarting")


@dataclass(frozen=True)
class LogChunk:
    """Lines as the runtime delivered them, and the cursor after the last one.

    ``lines`` are ``(timestamp, text)``; timestamps are RFC 3339 UTC strings. The cursor is
    opaque to everyone but the runtime that made it: passing it back resumes right after the
    last line, with no gap and no repeat.
    """

    lines: list[tuple[str, str]]
    cursor: str


@runtime_checkable
class Logs(Protocol):
    """A rank's output, resumable from a cursor: the console, the checks and the run's files
    are built on it, so every runtime has it."""

    def logs(self, container_id: str, cursor: str | None, follow: bool = True,
             secrets: Sequence[str] = ()) -> AsyncIterator[LogChunk]:
        """Batches of lines from ``cursor`` on; ends when the container stops (follow) or the
        captured output is exhausted (not follow); raises ``RuntimeLost`` when the connection
        to the engine drops, so the caller reconnects and resumes from its last cursor. A line
        cut for length is never cut inside one of ``secrets`` (the follower masks them)."""
        ...


class Containers(Logs, Protocol):
    """Everything the Orchestrator needs from one node's ranks (containers or processes)."""

    async def open(self) -> None:
        """Get ready to talk to the engine (the Docker runtime: its client over the node's
        connection), so the first request pays for nothing else; a failure is left to that
        request to report."""
        ...

    async def find(self, labels: dict[str, str]) -> list[ContainerState]: ...

    async def run(self, spec: ContainerSpec, extra_labels: dict[str, str]) -> ContainerState:
        """Create and start ``spec``. A container that already has its name is never removed
        here: ``NameTaken`` names it, and the caller decides (its own: remove, then run again)."""
        ...

    async def inspect(self, container_id: str) -> ContainerState: ...

    async def named(self, name: str) -> ContainerState | None:
        """The container that has this name, whoever made it; None when the name is free."""
        ...

    async def stop(self, container_id: str, timeout: float = 10.0) -> None: ...

    async def remove(self, container_id: str) -> None: ...


class RuntimeLost(Exception):
    """The engine (or the connection to it) went away; reconnect and resume."""


class NameTaken(SparkError):
    """The name a new rank asks for is held by a container that exists (running or not)."""

    def __init__(self, node: str, holder: ContainerState) -> None:
        self.node = node
        self.holder = holder
        super().__init__(f"container name {holder.name} is taken on node {node} "
                         f"(container {short_id(holder.id)}, {holder.status})")


class ImageMissing(SparkError):
    """A rank's image is not on its node (and could not be pulled): named as missing, not as an
    engine that cannot be reached, so the operator copies it (``sparktui image sync``)."""

    def __init__(self, node: str, image: str, reason: str = "") -> None:
        self.node = node
        self.image = image
        self.reason = reason
        super().__init__(f"image {image} is not on node {node}")
