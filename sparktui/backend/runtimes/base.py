"""What a runtime is, and the small capabilities it may declare (in the spirit of k9s's ``dao``
interfaces: the caller asks ``isinstance(runtime, Stage)``, never which kind it is).

``Runtime`` is what every kind has: per node, its ranks (``Containers``, logs included), a way
to connect, a sentence for how the node is reached, and a close. Everything else is a
capability a kind may lack; the Orchestrator degrades where one is missing (no ``NodeProbe``:
no health probes nor port check; no ``Images``: no image check before ``up`` and no image
sync; no ``RestartOne``: only group restarts; no ``Processes``: no engine liveness nor stack
dumps), and says so where an operator asked for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sparktui.backend.http import Opener
from sparktui.backend.nodeshell import NodeShell
from sparktui.backend.runtime import Containers
from sparktui.core.cluster import Node
from sparktui.core.kinds import Kind

if TYPE_CHECKING:
    from sparktui.backend.events import Event, NodeTelemetry
    from sparktui.backend.findings import Finding
    from sparktui.backend.imagesync import SyncReport
    from sparktui.backend.telemetry import Sampler
    from sparktui.core.plan import Plan
    from sparktui.core.procs import Proc


class Runtime(Protocol):
    """One cluster's runtime, built by its kind's factory (``backend.runtimes.register``)."""

    kind: Kind

    def containers(self, node: str) -> Containers:
        """The node's ranks: create, find, stop, remove, and follow their logs."""
        ...

    async def connect(self, node: str) -> None:
        """Reach the node (again, after a drop); ``NodeError`` says why it cannot be."""
        ...

    def describe(self, node: str) -> str:
        """How the node is reached, once connected (doctor's first finding)."""
        ...

    async def close(self) -> None:
        """Every connection closed; the ranks keep running."""
        ...


@runtime_checkable
class NodeExec(Protocol):
    """Commands on a node (doctor's node checks, telemetry's reads of ``/proc``)."""

    def shell(self, node: str) -> NodeShell: ...


@runtime_checkable
class NodeProbe(Protocol):
    """TCP connections opened as the node sees the network: health probes, the smoke test, the
    port check before ``up``."""

    def opener(self, node: str) -> Opener: ...

    def shown_host(self, node: str) -> str:
        """The node's address as a sentence shows where a probe went."""
        ...


@runtime_checkable
class RestartOne(Protocol):
    """One rank is replaced while the others run on."""

    async def retire(self, node: str, container_id: str, timeout: float) -> None:
        """Stop one rank's container, its log still readable (removed after the follower has
        drained it)."""
        ...


OldProcesses = Callable[[], Awaitable[list[int]]]
"""The pids of a removed container's processes still on its node (``Leftovers``)."""


@runtime_checkable
class Leftovers(Protocol):
    """What a removed container left running on its node: a restart waits until none of its
    processes remain (``backend/memwait``)."""

    async def remember(self, node: str, container_id: str) -> OldProcesses:
        """Called before the container is stopped: the call returned lists its processes still
        on the node; ``NodeError`` or ``RuntimeLost`` when they cannot be looked for."""
        ...


@runtime_checkable
class Stage(Protocol):
    """The staging agent run on a node: ``spec`` is its JSON argument, ``stdin`` its input
    (``staging.agent_input``), each output line handed to ``on_line``; returns its exit code."""

    async def run_agent(self, node: str, spec: dict[str, Any], on_line: Callable[[str], None],
                        stdin: str) -> int: ...


@runtime_checkable
class Images(Protocol):
    """Images on the nodes: their ids (the same build everywhere before ``up``) and a copy of
    one to the nodes that lack it."""

    async def image_id(self, node: str, image: str) -> str | None: ...

    async def sync_image(self, image: str, order: list[str], emit: Callable[[Event], None],
                         source: str | None) -> SyncReport: ...


@runtime_checkable
class Telemetry(Protocol):
    """Node samples (memory, load, GPUs, free space) while the console is open."""

    def sampler(self, plan: Plan, nodes: list[Node], emit: Callable[[NodeTelemetry], None], *,
                interval: float, low_memory: int) -> Sampler: ...


@runtime_checkable
class Preflight(Protocol):
    """The runtime's own lines of ``doctor`` for a node (Docker: the engine and the image), and
    the image's id there to compare across nodes (None: no image, or none to compare)."""

    async def preflight(self, node: Node, image: str, slug: str) -> tuple[list[Finding], str | None]:
        ...


@runtime_checkable
class Allocation(Protocol):
    """A scheduler hands out the nodes: the ranks wait (``queued``, with the scheduler's
    reason) until ``allocate`` returns, and ``release`` gives the nodes back after ``down``."""

    async def allocate(self, plan: Plan, run_id: str, waiting: Callable[[str], None]) -> None:
        """Returns once the nodes are held; ``waiting`` is told why not yet, each time that
        changes."""
        ...

    async def release(self) -> None: ...


@runtime_checkable
class Scheduled(Protocol):
    """The ranks run inside a scheduler's allocation: what it is, as a sentence for the console
    and ``status`` (Slurm: job, state, partition, nodes, time left)."""

    async def allocation(self) -> str | None:
        """The allocation as it stands now (asked of the scheduler); None: there is none."""
        ...


@runtime_checkable
class Processes(Protocol):
    """Inside a rank's container: its processes (is the engine alive?), a command run there
    and a signal sent to one of them (``sparktui dump``: py-spy, or the engine's stack
    signal). Pids are the ones ``processes`` lists; ``exec`` needs the container's own
    (``container_pid``)."""

    async def processes(self, node: str, container_id: str) -> list[Proc]:
        """Every process of the running container (unmasked: the caller masks before anything
        shows or keeps it); ``RuntimeLost`` or the runtime's error when it cannot be asked."""
        ...

    async def container_pid(self, node: str, container_id: str, pid: int) -> int | None:
        """``pid`` (as ``processes`` lists it) as the container itself sees it; None: gone."""
        ...

    async def exec(self, node: str, container_id: str, argv: list[str],
                   timeout: float) -> tuple[int, str]:
        """``argv`` run in the container (no shell): its exit code (127: no such program) and
        its output, stdout and stderr merged."""
        ...

    async def send_signal(self, node: str, container_id: str, pid: int, signal: str) -> None:
        """``signal`` (a name: ``SIGUSR1``) sent to ``pid`` (as ``processes`` lists it)."""
        ...
