"""The Docker rendering of a rank's neutral spec (``core.rankspec.ContainerSpec``): the ``docker
run`` line the plan shows and records, and the bind strings. The Docker runtime builds its SDK
call from the same spec (``backend/runtimes/docker.py``); another runtime renders the spec its
own way and never reads this."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from sparktui.core.secrets import Conceal

if TYPE_CHECKING:
    from sparktui.core.rankspec import ContainerSpec, MountSpec


def bind(m: MountSpec) -> str:
    """Docker's ``host:container:mode`` (validation keeps ``:`` out of recipe paths)."""
    return f"{m.source}:{m.target}:{'ro' if m.read_only else 'rw'}"


def docker_run_line(c: ContainerSpec, show_secrets: bool = False,
                    conceal: Conceal | None = None) -> str:
    """A shell-quoted ``docker run`` that starts the same container (secrets masked unless
    ``show_secrets``)."""
    q = shlex.quote
    d = c.docker
    parts = ["docker", "run", "-d", "--name", q(c.name)]
    parts += ["--network", q(d.network_mode), "--ipc", q(d.ipc_mode)]
    if c.shm_size:
        parts += ["--shm-size", q(c.shm_size)]
    if c.memory_limit is not None:
        parts += ["--memory", str(c.memory_limit), "--memory-swap", str(c.memory_limit)]
    if c.gpus and c.gpus != "none":
        parts += ["--gpus", q(c.gpus)]
    for dev in c.devices:
        parts += ["--device", q(dev)]
    for cap in d.cap_add:
        parts += ["--cap-add", q(cap)]
    for name, limit in d.ulimits.items():
        parts += ["--ulimit", q(f"{name}={limit}")]
    for m in c.shown_mounts(show_secrets, conceal):
        parts += ["-v", q(f"{m.source}:{m.target}" + (":ro" if m.read_only else ""))]
    for k, v in c.shown_env(show_secrets, conceal).items():
        parts += ["-e", q(f"{k}={v}")]
    for k, v in c.shown_labels(show_secrets, conceal).items():
        parts += ["--label", q(f"{k}={v}")]
    entrypoint = c.shown_entrypoint(show_secrets, conceal)
    if entrypoint:
        parts += ["--entrypoint", q(entrypoint[0])]
    parts.append(q(c.image))
    parts += [q(a) for a in entrypoint[1:]]
    parts += [q(a) for a in c.shown_command(show_secrets, conceal)]
    return " ".join(parts)


def docker_cli_args(c: ContainerSpec, extra_labels: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """What follows ``docker run -d`` for the Docker client on a node (the Slurm step's
    supervisor runs it), as the Docker runtime's SDK call has it (``--init`` included), and the
    environment to give the client: every variable goes by name (``-e NAME``), its value through
    the client's environment, so no value, secret or not, is on a command line."""
    d = c.docker
    args = ["--init", "--name", c.name, "--network", d.network_mode, "--ipc", d.ipc_mode]
    if c.shm_size:
        args += ["--shm-size", c.shm_size]
    if c.memory_limit is not None:  # swap equal to it: no swapping around the limit
        args += ["--memory", str(c.memory_limit), "--memory-swap", str(c.memory_limit)]
    if c.gpus and c.gpus.strip().lower() != "none":
        args += ["--gpus", c.gpus]
    for dev in c.devices:
        args += ["--device", dev]
    for cap in d.cap_add:
        args += ["--cap-add", cap]
    for name, limit in d.ulimits.items():
        args += ["--ulimit", f"{name}={limit}:{limit}"]
    for m in c.mounts:
        args += ["-v", bind(m)]
    for k in c.env:
        args += ["-e", k]
    for k, v in {**c.labels, **extra_labels}.items():
        args += ["--label", f"{k}={v}"]
    if c.entrypoint:
        args += ["--entrypoint", c.entrypoint[0]]
    args.append(c.image)
    args += c.entrypoint[1:]
    args += c.command
    return args, dict(c.env)


def short_id(ident: str) -> str:
    """A rank's id as a table shows it: a Docker id (hex digits) cut to 12 as ``docker ps``
    has it; a runtime's own (``slurm-14-r2-1``, ``local-...``) whole."""
    return ident[:12] if all(c in "0123456789abcdef" for c in ident) else ident
