"""The recipe's image, the same build on every node: find the nodes that lack it or hold another
build (what ``up`` checks first), and copy it to them from one source (``sparktui image sync``,
the doctor's sync key).

A copy is one ``docker save`` stream from the source's engine fanned out to every target's
``docker load`` at once (``imagecopy``). The engines are reached as everywhere else: the docker
SDK over each node's SSH-forwarded Docker socket (or this machine's engine for ``--from local``),
in threads. ``docker load`` reads the whole archive before it registers a layer or sets a tag, so
a copy cut short (the source gone, this process killed) leaves nothing tagged on the target; the
next sync copies again. Afterwards every target's id is checked. Nothing is ever deleted: a
target's other build stays as an untagged image.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import docker
import docker.errors
import docker.utils

from sparktui.backend.events import Event, ImageSyncProgress
from sparktui.backend.imagecopy import copy_image
from sparktui.backend.nodeshell import NodeError
from sparktui.core.errors import SparkError, sentence
from sparktui.core.units import format_bytes, format_duration


class ImageIds(Protocol):
    """What the check reads of a runtime (``runtimes.base.Images``, which names this module's
    report: a protocol here, not an import back)."""

    async def image_id(self, node: str, image: str) -> str | None: ...


DockerUrl = Callable[[], Awaitable[str]]
"""A node's Docker engine as a URL (``runtimes.tunnel.DockerTunnel.url``)."""
LOCAL = "local"
"""``--from local``: this machine's Docker engine (``DOCKER_HOST``, else the default socket)."""
IO_TIMEOUT = 1800.0
"""Seconds any one read may wait: after the last byte a target's engine registers the layers
before it answers, which takes minutes for a large image."""


class ImageSyncError(SparkError):
    """The sync cannot start: no source has the image, or the source cannot be reached."""


class ImageMismatch(SparkError):
    """``up`` refused: the image differs across nodes or is missing on some."""

    def __init__(self, check: ImageCheck, slug: str) -> None:
        self.check = check
        super().__init__(f"{check.sentence()}; nothing was started. Copy it with: "
                         f"sparktui image sync {slug}")


def short(image_id: str | None) -> str:
    """``sha256:b339baae5e5f…`` -> ``b339baae5e5f``, as ``docker images`` shows it."""
    return (image_id or "-").removeprefix("sha256:")[:12]


def progress_sentence(p: ImageSyncProgress) -> str:
    """One node's sync as a line (the CLI without a terminal, the console's doctor)."""
    if p.phase == "skipped":
        return f"{p.node}: already has {p.image} {short(p.image_id)}, skipped"
    if p.phase == "loading":
        return f"{p.node}: {format_bytes(p.bytes_done)} sent; its engine is loading the layers"
    if p.phase == "done":
        return f"{p.node}: done, {format_bytes(p.bytes_done)} copied, now {short(p.image_id)}"
    if p.phase == "failed":
        return f"{p.node}: failed: {p.error}"
    if p.bytes_done == 0:
        return f"{p.node}: copying ~{format_bytes(p.bytes_total)} from {p.source}"
    eta = f", {format_duration(p.eta)} left" if p.eta is not None else ""
    return (f"{p.node}: sending {format_bytes(p.bytes_done)} of ~{format_bytes(p.bytes_total)} "
            f"from {p.source} at {format_bytes(p.rate)}/s{eta}")


def default_source(order: list[str], ids: dict[str, str | None]) -> str | None:
    """The head if it has the image, else the first node (in rank order) that has it."""
    return next((name for name in order if ids.get(name)), None)


@dataclass(frozen=True)
class ImageCheck:
    """The image's id on every node (``None``: not there), judged against the reference: the
    node a sync would copy from by default (the head if it has the image)."""

    image: str
    ids: dict[str, str | None]  # in rank order
    reference: str | None

    @property
    def missing(self) -> list[str]:
        return [name for name, image_id in self.ids.items() if image_id is None]

    @property
    def different(self) -> list[str]:
        ref = self.ids.get(self.reference) if self.reference else None
        return [name for name, image_id in self.ids.items() if image_id is not None and image_id != ref]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.different

    def sentence(self) -> str:
        """One line naming every node that is off, and how."""
        if self.ok:
            return f"every node has {self.image} {short(next(iter(self.ids.values()), None))}"
        parts = []
        if self.missing:
            parts.append(f"not on {', '.join(self.missing)}")
        if self.different and self.reference:
            ids = ", ".join(f"{n} {short(self.ids[n])}" for n in self.different)
            parts.append(f"another build on {ids} ({self.reference} has "
                         f"{short(self.ids[self.reference])})")
        return f"image {self.image} is {'; '.join(parts)}"


@dataclass(frozen=True)
class SyncResult:
    """One node of a sync: ``skipped`` (it already had the source's build), ``copied`` (loaded
    and its id checked) or ``failed`` (``error``)."""

    node: str
    action: Literal["skipped", "copied", "failed"]
    image_id: str | None = None
    bytes_sent: int = 0
    seconds: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "action": self.action, "image_id": self.image_id,
                "bytes_sent": self.bytes_sent, "seconds": round(self.seconds, 3), "error": self.error}


@dataclass(frozen=True)
class SyncReport:
    image: str
    source: str
    source_id: str
    results: list[SyncResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.action != "failed" for r in self.results)

    @property
    def copied(self) -> list[str]:
        return [r.node for r in self.results if r.action == "copied"]

    def to_json(self) -> dict[str, object]:
        return {"image": self.image, "source": self.source, "source_id": self.source_id,
                "ok": self.ok, "seconds": round(self.seconds, 3),
                "nodes": [r.to_json() for r in self.results]}


async def check_images(image: str, order: list[str], runtime: ImageIds) -> ImageCheck:
    """The image's id on every node at once; a node that cannot be asked is an error."""
    found = await asyncio.gather(*(runtime.image_id(name, image) for name in order),
                                 return_exceptions=True)
    ids: dict[str, str | None] = {}
    for name, got in zip(order, found, strict=True):
        if isinstance(got, BaseException):
            raise ImageSyncError(f"cannot read the image on {name}: {sentence(got)}")
        ids[name] = got
    return ImageCheck(image, ids, default_source(order, ids))


# -- the engines ----------------------------------------------------------------------------------

def _client(url: str | None) -> docker.APIClient:
    """A low-level client; ``url`` None: this machine's engine."""
    kwargs: dict[str, Any] = docker.utils.kwargs_from_env() if url is None else {"base_url": url}
    return docker.APIClient(version="auto", timeout=IO_TIMEOUT, **kwargs)


def _inspect(api: docker.APIClient, image: str) -> tuple[str, int] | None:
    """(id, size) of the image on this engine, None when it is not there."""
    try:
        attrs = api.inspect_image(image)
    except docker.errors.ImageNotFound:
        return None
    return str(attrs["Id"]), int(attrs.get("Size") or 0)


async def _connect(name: str, docker_url: DockerUrl | None) -> docker.APIClient:
    try:
        url = await docker_url() if docker_url is not None else None
        return await asyncio.to_thread(_client, url)
    except NodeError as exc:
        raise ImageSyncError(str(exc)) from None
    except Exception as exc:  # the SDK's version probe: engine down, socket missing
        where = "this machine's Docker engine" if docker_url is None else f"{name}'s Docker engine"
        raise ImageSyncError(f"cannot reach {where}: {sentence(exc)}") from None


async def sync_image(image: str, order: list[str], urls: Mapping[str, DockerUrl],
                     emit: Callable[[Event], None], source: str | None = None) -> SyncReport:
    """Make every node in ``order`` hold the source's build of ``image``: copied to the nodes
    that lack it or hold another, all at once; then every node's id is checked. ``source``: a
    node name or ``local``; default the head if it has the image, else the first node that has
    it, else this machine's engine."""
    t0 = time.monotonic()
    clients = await asyncio.gather(*(_connect(name, urls[name]) for name in order),
                                   return_exceptions=True)
    apis: dict[str, docker.APIClient] = {}
    unreachable: dict[str, str] = {}
    for name, got in zip(order, clients, strict=True):
        if isinstance(got, BaseException):
            unreachable[name] = sentence(got)
        else:
            apis[name] = got
    if source is not None and source != LOCAL and source not in apis:
        if source in unreachable:
            raise ImageSyncError(unreachable[source])
        if source in urls:  # a node of the cluster outside this recipe's ranks
            apis[source] = await _connect(source, urls[source])
        else:
            raise ImageSyncError(f"--from {source}: no such node (nodes: {', '.join(order)}, or local)")
    found = await asyncio.gather(*(asyncio.to_thread(_inspect, api, image) for api in apis.values()),
                                 return_exceptions=True)
    facts: dict[str, tuple[str, int] | None] = {}
    for name, got in zip(apis, found, strict=True):
        if isinstance(got, BaseException):
            unreachable[name] = f"cannot read the image on {name}: {sentence(got)}"
            continue
        facts[name] = got
    ids = {name: (facts[name] or ("", 0))[0] or None for name in facts}
    if source is None:
        source = default_source([n for n in order if n in facts], ids) or LOCAL
    if source == LOCAL:
        try:
            local = await _connect(LOCAL, None)
        except ImageSyncError as exc:
            raise ImageSyncError(f"no node has {image}, and {exc}") from None
        here = await asyncio.to_thread(_inspect, local, image)
        if here is None:
            raise ImageSyncError(f"no node has {image}, and neither has this machine's Docker engine")
        apis[LOCAL], facts[LOCAL] = local, here
    if source in unreachable:
        raise ImageSyncError(unreachable[source])
    source_facts = facts.get(source)
    if source_facts is None:
        raise ImageSyncError(f"{source} does not have {image}; copy from a node that has it "
                             f"(--from NODE) or from this machine (--from local)")
    source_id, size = source_facts
    results: dict[str, SyncResult] = {}
    targets: dict[str, docker.APIClient] = {}
    for name in order:
        if name == source:
            results[name] = SyncResult(name, "skipped", source_id)
        elif name in unreachable:
            results[name] = SyncResult(name, "failed", error=unreachable[name])
        elif ids.get(name) == source_id:
            results[name] = SyncResult(name, "skipped", source_id)
            emit(ImageSyncProgress(name, image, source, "skipped", image_id=source_id))
        else:
            targets[name] = apis[name]
    if targets:
        copied = await copy_image(image, apis[source], source, size, targets, emit)
        after = await asyncio.gather(*(asyncio.to_thread(_inspect, targets[n], image) for n in targets),
                                     return_exceptions=True)
        for (name, (error, sent, seconds)), got in zip(copied.items(), after, strict=True):
            now_id = None if isinstance(got, BaseException) or got is None else got[0]
            if error is None and now_id != source_id:
                error = (f"after loading, {name} has {image} {short(now_id)}, expected "
                         f"{short(source_id)}")
            if error is None:
                results[name] = SyncResult(name, "copied", now_id, sent, seconds)
                emit(ImageSyncProgress(name, image, source, "done", sent, sent, image_id=now_id))
            else:
                results[name] = SyncResult(name, "failed", now_id, sent, seconds, error)
                emit(ImageSyncProgress(name, image, source, "failed", sent, max(size, sent),
                                       image_id=now_id, error=error))
    for api in apis.values():
        with contextlib.suppress(Exception):
            await asyncio.to_thread(api.close)
    return SyncReport(image, source, source_id, [results[n] for n in order],
                      time.monotonic() - t0)
