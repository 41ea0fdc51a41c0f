"""Ranks as Docker containers on a node's own engine, reached through a URL (the SSH tunnel to
the node's socket, ``tunnel.py``); and doctor's Docker probes (``preflight``).

The docker SDK blocks, so every call runs in a thread; the SSH tunnel it talks through is
served by the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

import docker
import docker.errors
import docker.types
import requests.exceptions

from sparktui.backend.doctor import Finding
from sparktui.backend.logpump import FrameLines, Handoff, normalize_ts, split_ts
from sparktui.backend.runtime import (
    ContainerState,
    ImageMissing,
    LogChunk,
    NameTaken,
    RuntimeLost,
    Status,
)
from sparktui.core.cluster import Node
from sparktui.core.dockerview import bind
from sparktui.core.procs import PS_ARGS, Proc, from_top
from sparktui.core.rankspec import ContainerSpec
from sparktui.core.timing import mark

T = TypeVar("T")
_LOST = (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError,
         requests.exceptions.ReadTimeout, ConnectionError, OSError)


def parse_cursor(cursor: str | None) -> tuple[str, int] | None:
    """Cursor = last timestamp seen and how many lines carried exactly that timestamp."""
    if not cursor:
        return None
    ts, _, count = cursor.rpartition("|")
    return (ts, int(count)) if ts and count.isdigit() else None


def _epoch(ts: str) -> int:
    base = ts.rstrip("Z").partition(".")[0]
    return int(datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp())


class DockerRuntime:
    """One node's ranks as containers of its engine at ``url()`` (asked again before every
    request: a reconnected tunnel has a new socket)."""

    def __init__(self, node: str, url: Callable[[], Awaitable[str]]) -> None:
        self.node = node
        self._get_url = url
        self._client: docker.DockerClient | None = None
        self._url: str | None = None

    async def _docker(self) -> docker.DockerClient:
        try:
            url = await self._get_url()
        except Exception as exc:
            raise RuntimeLost(str(exc)) from None
        if self._client is None or url != self._url:
            self._url = url
            mark(f"docker {self.node}: client")
            self._client = await asyncio.to_thread(docker.DockerClient, base_url=url, timeout=60,
                                                   version="auto")
            mark(f"docker {self.node}: client ready")
        return self._client

    async def _call(self, fn: Callable[[docker.DockerClient], T]) -> T:
        client = await self._docker()
        try:
            return await asyncio.to_thread(fn, client)
        except _LOST as exc:
            self._client = None
            raise RuntimeLost(f"{self.node}: Docker engine unreachable: {exc}") from None
        except docker.errors.DockerException as exc:
            if isinstance(exc, docker.errors.NotFound):
                raise
            if "Connection" in str(exc) or "Max retries" in str(exc):
                self._client = None
                raise RuntimeLost(f"{self.node}: {exc}") from None
            raise

    async def open(self) -> None:
        """The Docker client (its tunnel and its API version request) made now: ``connect``
        calls this as each node's SSH connection opens, while other nodes still connect."""
        with contextlib.suppress(Exception):  # the engine unreachable: the first request says so
            await self._docker()

    async def version(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call(lambda c: c.version())
        return result

    async def image_id(self, image: str) -> str | None:
        def get(c: docker.DockerClient) -> str | None:
            try:
                return str(c.images.get(image).id)
            except docker.errors.ImageNotFound:
                return None
        return await self._call(get)

    @staticmethod
    def _state(c: Any) -> ContainerState:
        a = c.attrs
        st = a.get("State", {})
        status: Status = st.get("Status", "missing")
        return ContainerState(
            id=c.id, name=a.get("Name", "").lstrip("/"), status=status,
            exit_code=st.get("ExitCode") if status in ("exited", "dead") else None,
            started_at=st.get("StartedAt"), finished_at=st.get("FinishedAt"),
            labels=dict(a.get("Config", {}).get("Labels") or {}), image_id=a.get("Image"),
            created_at=a.get("Created"), oom_killed=bool(st.get("OOMKilled")),
        )

    async def find(self, labels: dict[str, str]) -> list[ContainerState]:
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        found = await self._call(lambda c: c.containers.list(all=True, filters=filters))
        return [self._state(c) for c in found]

    async def inspect(self, container_id: str) -> ContainerState:
        def get(c: docker.DockerClient) -> ContainerState:
            try:
                return self._state(c.containers.get(container_id))
            except docker.errors.NotFound:
                return ContainerState(container_id, "", "missing")
        return await self._call(get)

    async def run(self, spec: ContainerSpec, extra_labels: dict[str, str]) -> ContainerState:
        """The Docker rendering of the neutral spec: the SDK's ``create`` arguments."""
        kwargs: dict[str, Any] = dict(
            image=spec.image, command=spec.command, entrypoint=spec.entrypoint or None,
            environment=spec.env, name=spec.name, detach=True,
            labels={**spec.labels, **extra_labels}, network_mode=spec.docker.network_mode,
            ipc_mode=spec.docker.ipc_mode, init=True,
            # a list of binds: a dict keyed by the host path kept one of two mounts of one folder
            volumes=[bind(m) for m in spec.mounts],
        )
        if spec.shm_size:
            kwargs["shm_size"] = spec.shm_size
        if spec.memory_limit is not None:  # swap equal to it: the kernel kills at the limit
            kwargs["mem_limit"] = kwargs["memswap_limit"] = spec.memory_limit
        if spec.devices:
            kwargs["devices"] = [f"{d}:{d}:rwm" if ":" not in d else d for d in spec.devices]
        if spec.docker.cap_add:
            kwargs["cap_add"] = spec.docker.cap_add
        if spec.docker.ulimits:
            kwargs["ulimits"] = [docker.types.Ulimit(name=k, soft=v, hard=v)
                                 for k, v in spec.docker.ulimits.items()]
        gpus = spec.gpus.strip().lower()
        if gpus and gpus != "none":
            if gpus == "all":
                req = docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])
            elif gpus.isdigit():
                req = docker.types.DeviceRequest(count=int(gpus), capabilities=[["gpu"]])
            else:
                req = docker.types.DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])
            kwargs["device_requests"] = [req]

        def start(c: docker.DockerClient) -> ContainerState:
            # Three requests when nothing is in the way (create, its inspect, start): asking first
            # whether the image is there and whether a container holds the name cost two more
            # round trips through the node's tunnel per rank, on every launch.
            try:
                container = self._create(c, spec.name, kwargs)
            except docker.errors.ImageNotFound:
                self._ensure_image(c, spec.image)  # pulled, or ImageMissing
                container = self._create(c, spec.name, kwargs)
            mark(f"docker {self.node}: {spec.name} created")
            container.start()
            mark(f"docker {self.node}: {spec.name} started")
            return self._state(container)
        return await self._call(start)

    def _create(self, c: docker.DockerClient, name: str, kwargs: dict[str, Any]) -> Any:
        """The container, created. A container holding its name (another operator's, one
        sparktui never made, one created meanwhile) is ``NameTaken``: removing it is the
        caller's decision (``up`` clears the operator's own stopped ones first), never a side
        effect."""
        try:
            return c.containers.create(**kwargs)
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # Conflict: the name is in use
                self._name_free(c, name)
            raise

    def _by_name(self, c: docker.DockerClient, name: str) -> ContainerState | None:
        try:
            holder = self._state(c.containers.get(name))
        except docker.errors.NotFound:
            return None
        return holder if holder.name == name else None  # get() also takes an id prefix

    def _name_free(self, c: docker.DockerClient, name: str) -> None:
        """``NameTaken`` when a container has ``name``."""
        holder = self._by_name(c, name)
        if holder is not None:
            raise NameTaken(self.node, holder)

    async def named(self, name: str) -> ContainerState | None:
        return await self._call(lambda c: self._by_name(c, name))

    def _ensure_image(self, c: docker.DockerClient, image: str) -> None:
        """The image on the node, pulled if a registry has it; else ``ImageMissing``. (The SDK's
        own pull-on-run failed as an HTTP 500 that read like an engine that cannot be reached.)"""
        try:
            c.images.get(image)
            return
        except docker.errors.ImageNotFound:
            pass
        try:
            c.images.pull(image)
        except docker.errors.APIError as exc:
            raise ImageMissing(self.node, image, str(exc.explanation or exc)) from None

    async def stop(self, container_id: str, timeout: float = 10.0) -> None:
        def stop(c: docker.DockerClient) -> None:
            with contextlib.suppress(docker.errors.NotFound):
                c.containers.get(container_id).stop(timeout=int(timeout))
        await self._call(stop)

    async def remove(self, container_id: str) -> None:
        def rm(c: docker.DockerClient) -> None:
            with contextlib.suppress(docker.errors.NotFound):
                c.containers.get(container_id).remove(force=True)
        await self._call(rm)

    async def top(self, container_id: str) -> list[Proc]:
        """The container's processes (``PS_ARGS``; the node's pids): dockerd runs the node's
        ``ps``, so this works whatever the image holds. A container that does not run answers
        409, raised as the SDK's ``APIError`` (a gone one 404, ``NotFound``). One request: the
        SDK's ``containers.get(...).top`` inspects the container first, and the engine watch
        asks this of every rank at every interval."""
        answer: dict[str, Any] = await self._call(
            lambda c: c.api.top(container_id, ps_args=PS_ARGS))
        return from_top(answer.get("Titles") or [], answer.get("Processes") or [])

    async def exec(self, container_id: str, argv: list[str], timeout: float) -> tuple[int, str]:
        """``argv`` in the container, as root, no TTY, no shell. A program the image lacks is
        127, as a shell says. The SDK's call blocks until the program ends: past ``timeout``
        the caller stops waiting (the program runs on until it ends by itself)."""
        def run(c: docker.DockerClient) -> tuple[int, str]:
            try:
                res = c.containers.get(container_id).exec_run(argv, stdout=True, stderr=True,
                                                              demux=False)
            except docker.errors.APIError as exc:
                text = str(exc.explanation or exc)
                if "executable file not found" in text or "no such file" in text.lower():
                    return 127, text
                raise
            output = res.output.decode("utf-8", "replace") if res.output else ""
            code = res.exit_code if res.exit_code is not None else 255
            return (127 if code == 126 and "not found" in output else code), output
        try:
            return await asyncio.wait_for(self._call(run), timeout)
        except asyncio.TimeoutError:
            return 124, f"{argv[0]} did not finish within {timeout:g} s"

    async def logs(self, container_id: str, cursor: str | None, follow: bool = True,
                   secrets: Sequence[str] = ()) -> AsyncIterator[LogChunk]:
        """Stream from the cursor on. Docker's ``since`` has whole-second resolution here, so
        the first second is read again and the lines already seen are skipped by timestamp."""
        client = await self._docker()
        last = parse_cursor(cursor)
        since = _epoch(last[0]) if last else None
        handoff = Handoff(asyncio.get_running_loop())
        holder: list[Any] = []

        def pump() -> None:
            try:
                container = client.containers.get(container_id)
                kwargs: dict[str, Any] = {"stream": True, "follow": follow, "timestamps": True}
                if since is not None:
                    kwargs["since"] = since
                stream: Iterator[bytes] = container.logs(**kwargs)
                holder.append(stream)
                frames = FrameLines(whole=secrets)
                for frame in stream:  # one message each: the container has no TTY
                    if not handoff.put(frames.feed(frame)):
                        return
                handoff.put(frames.close())
                handoff.finish()
            except BaseException as exc:  # handed to the event loop, raised there
                handoff.finish(exc)

        thread = threading.Thread(target=pump, name=f"logs-{container_id[:12]}", daemon=True)
        thread.start()
        last_key = (split_ts(last[0])[:2], last[1]) if last else None
        cur_ts, cur_count = (normalize_ts(last[0]), last[1]) if last else ("", 0)
        skip_same = last[1] if last else 0
        try:
            while True:
                try:
                    batch = await handoff.take()
                except docker.errors.NotFound:
                    return
                except (*_LOST, docker.errors.DockerException) as exc:
                    raise RuntimeLost(f"{self.node}: log stream lost: {exc}") from None
                if batch is None:
                    return
                lines: list[tuple[str, str]] = []
                for ts, text in batch:
                    if last_key is not None:  # still inside the second read again
                        key = split_ts(ts)[:2]
                        if key < last_key[0]:
                            continue
                        if key == last_key[0] and skip_same > 0:
                            skip_same -= 1
                            continue
                        if key > last_key[0]:
                            last_key = None  # past the cursor: lines come in order
                    if ts == cur_ts:
                        cur_count += 1
                    else:
                        cur_ts, cur_count = ts, 1
                    lines.append((ts, text))
                if lines:
                    yield LogChunk(lines, f"{cur_ts}|{cur_count}")
        finally:
            handoff.close()
            for stream in holder:  # unblock the pump's read
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(stream.close)


async def preflight(rt: DockerRuntime, node: Node, image: str,
                    slug: str) -> tuple[list[Finding], str | None]:
    """Doctor's Docker lines for a node: the engine answers (its version), the image is there
    (its id, compared across nodes by doctor)."""
    found: list[Finding] = []
    image_id: str | None = None
    try:
        version = await rt.version()
        found.append(Finding(node.name, "docker", "passed",
                             f"Docker {version.get('Version', '?')} at {node.docker.socket}"))
        image_id = await rt.image_id(image)
        if image_id is None:
            found.append(Finding(node.name, "image", "failed",
                                 f"image {image} is not on this node; copy it with "
                                 f"sparktui image sync {slug}"))
        else:
            found.append(Finding(node.name, "image", "passed", f"{image} is {image_id[7:19]}"))
    except Exception as exc:  # RuntimeLost, NodeError, the SDK's own
        found.append(Finding(node.name, "docker", "failed",
                             f"Docker engine at {node.docker.socket} unreachable: {exc}"))
    return found, image_id
