"""Ground truth for the soak's checkers: what Docker says on each node (through the node's own
engine socket, from the root namespace: a cut network does not hide it) and what each rank
wrote, numbered by the demo engine's ticks (``demo tick <n>``, n = 1, 2, ... in each container).

sparktui's view is never the truth here: a rank's file is checked against the ticks its
containers wrote, and ``status --json`` against the containers Docker runs.
"""

from __future__ import annotations

import contextlib
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests

from sparktui.backend.runtimes.slurm import LABEL_JOB, rank_id
from sparktui.core.dockerview import short_id
from sparktui.core.plan import LABEL_RANK, LABEL_RECIPE

TICK = re.compile(rb"demo tick (\d+)$")
MARKER = re.compile(rb"^--- sparktui: rank \d+ restarted .*\(container (\S+) replaced\) ---$")
DOCKER_TIMEOUT_S = 4.0
"""A paused engine answers nothing: its node's truth is unknown for that moment."""
DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


@dataclass
class Container:
    """One of the recipe's containers as its node's Docker sees it."""

    node: str
    rank: int
    id: str  # as sparktui names it: Docker's id, or a Slurm rank's ``slurm-<job>-r<rank>-<attempt>``
    running: bool
    created: str
    docker_id: str = ""

    def __post_init__(self) -> None:
        self.docker_id = self.docker_id or self.id


@dataclass
class Segment:
    """A rank's file between restart markers: the ticks of one container, in file order."""

    container: str | None  # the short id its closing marker names; None: the last segment
    ticks: list[int] = field(default_factory=list)
    dupes: int = 0


def segments(path: Path) -> list[Segment]:
    """The rank's file cut at each restart marker (``<ts>\\t<text>`` lines)."""
    out = [Segment(None)]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return out
    for line in data.split(b"\n"):
        text = line.partition(b"\t")[2]
        if (m := MARKER.match(text)) is not None:
            out[-1].container = m.group(1).decode()
            out.append(Segment(None))
        elif (t := TICK.search(text)) is not None:
            out[-1].ticks.append(int(t.group(1)))
    return out


def first_break(ticks: list[int]) -> str | None:
    """Where ``ticks`` stops being 1, 2, 3, ...: a line lost, written twice or out of order."""
    for due, tick in enumerate(ticks, 1):
        if tick != due:
            if tick < due:
                return f"tick {tick} again after {due - 1} (a line written twice or out of order)"
            return f"tick {tick} where {due} was due (ticks {due}-{tick - 1} lost)"
    return None


def ticks_of(text: bytes) -> list[int]:
    return [int(m.group(1)) for line in text.split(b"\n") if (m := TICK.search(line))]


class Docker:
    """The recipe's containers on every node, asked of each node's engine directly."""

    def __init__(self, nodes: dict[str, Any], slug: str) -> None:
        self.slug = slug
        self.nodes = nodes
        self._clients: dict[str, docker.DockerClient] = {}

    @classmethod
    def of(cls, testbed: Any, slug: str) -> Docker:
        return cls({n.name: n for n in testbed.nodes}, slug)

    def client(self, node: str) -> docker.DockerClient:
        if node not in self._clients:
            self._clients[node] = docker.DockerClient(
                base_url=f"unix://{self.nodes[node].docker_socket}", timeout=DOCKER_TIMEOUT_S)
        return self._clients[node]

    def containers(self, node: str) -> list[Container]:
        """The node's containers of the recipe (raises when its engine does not answer)."""
        found = self.client(node).api.containers(
            all=True, filters={"label": f"{LABEL_RECIPE}={self.slug}"})
        return [Container(node, int(c["Labels"][LABEL_RANK]), sparktui_id(c), c["State"] == "running",
                          str(c.get("Created", "")), c["Id"]) for c in found]

    def all(self) -> tuple[dict[int, list[Container]], list[str]]:
        """Every rank's containers, and the nodes whose engine did not answer."""
        ranks: dict[int, list[Container]] = {}
        silent = []
        for node in self.nodes:
            try:
                for c in self.containers(node):
                    ranks.setdefault(c.rank, []).append(c)
            except DOCKER_ERRORS:
                silent.append(node)
        return ranks, silent

    def ticks(self, c: Container, tail: int | str = "all") -> list[int]:
        raw = self.client(c.node).api.logs(c.docker_id, stdout=True, stderr=True, tail=tail)
        return ticks_of(raw)

    def kill(self, c: Container) -> None:
        self.client(c.node).api.kill(c.docker_id)

    def remove(self, c: Container) -> None:
        self.client(c.node).api.remove_container(c.docker_id, force=True)

    def close(self) -> None:
        for c in self._clients.values():
            with contextlib.suppress(Exception):
                c.close()
        self._clients.clear()


class Recorder:
    """The highest tick each container was seen to have written, sampled every ``period``
    seconds in a thread: a container replaced (and removed) later can no longer be asked, and
    its segment of the file must reach at least this far."""

    def __init__(self, truth: Docker, period: float = 1.0) -> None:
        self.truth = Docker(truth.nodes, truth.slug)  # its own clients: the thread's
        self.period = period
        self.seen: dict[str, int] = {}
        self.latest: tuple[dict[int, list[Container]], list[str]] | None = None
        """Docker's view of every rank at the last sample (for a console under test, whose
        loop must not wait on Docker)."""
        self._lock = threading.Lock()  # the checks read ``seen`` while the thread adds to it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self.truth.close()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            ranks: dict[int, list[Container]] = {}
            silent = []
            for node in self.truth.nodes:
                try:
                    for c in self.truth.containers(node):
                        ranks.setdefault(c.rank, []).append(c)
                        if c.running:
                            ticks = self.truth.ticks(c, tail=3)
                            if ticks:
                                with self._lock:
                                    self.seen[c.id] = max(self.seen.get(c.id, 0), max(ticks))
                except DOCKER_ERRORS:
                    silent.append(node)
            self.latest = (ranks, silent)

    def seen_of(self, short: str) -> int:
        with self._lock:
            seen = list(self.seen.items())
        return max((n for cid, n in seen if names(cid, short)), default=0)


def sparktui_id(c: dict[str, Any]) -> str:
    """The id sparktui gives the container: Docker's, or for a Slurm step's container its rank
    attempt's (the job from its label, the attempt from its name's ``-<attempt>`` end)."""
    job = c["Labels"].get(LABEL_JOB)
    if job is None:
        return str(c["Id"])
    name = (c.get("Names") or ["/"])[0].lstrip("/")
    return rank_id(job, int(c["Labels"][LABEL_RANK]), int(name.rpartition("-")[2]))


def names(full: str, named: str) -> bool:
    """Whether sparktui's ``named`` (a Docker id or its first 12, a Slurm rank's id whole) is
    the container ``full``: a prefix only of a Docker id (``slurm-4-r0-1`` is not
    ``slurm-4-r0-10``: the Slurm soak's first run took one for the other)."""
    if full == named:
        return True
    return len(named) >= 12 and short_id(full) != full and full.startswith(named)
