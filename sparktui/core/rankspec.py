"""What one rank runs, in no runtime's words (``ContainerSpec``), in a module of its own: the
plan builds it and records its Docker rendering (``core.dockerview``), which reads it, so neither
imports the other back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sparktui.core.redact import MIN_REDACT
from sparktui.core.secrets import Conceal, SecretRules, conceal_text, masked, shown


@dataclass(frozen=True)
class MountSpec:
    """A node's folder seen by the rank at ``target`` (the same path for a local process)."""

    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class DockerOptions:
    """What only a container engine takes for a rank: the host's namespaces it shares and the
    cluster file's ``[docker]`` capabilities and limits. Another runtime leaves them aside."""

    network_mode: str = "host"
    ipc_mode: str = "host"
    cap_add: list[str] = field(default_factory=list)
    ulimits: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerSpec:
    """What one rank runs, in no runtime's words: the image, the process (``entrypoint`` then
    ``command``), its environment, mounts, shared memory, GPUs, devices and labels. Each
    runtime renders it its own way: Docker as a container (``core.dockerview`` and
    ``backend/runtimes/docker.py``, with ``docker``'s options), the local runtime as a process
    with ``env``; a Slurm runtime as a step."""

    name: str
    image: str
    entrypoint: list[str]
    command: list[str]
    env: dict[str, str]
    mounts: list[MountSpec]
    shm_size: str | None
    gpus: str
    devices: list[str]
    labels: dict[str, str]
    secrets: SecretRules = field(default=SecretRules())  # which env and args values are secret
    docker: DockerOptions = field(default_factory=DockerOptions)
    memory_limit: int | None = None
    """Bytes the rank may hold (``[memory] limit``): Docker's ``--memory`` with swap equal, so
    the kernel kills it at the limit (and says so) before it takes the node; None: no limit."""

    @property
    def argv(self) -> list[str]:
        """The process the container runs: entrypoint followed by command."""
        return [*self.entrypoint, *self.command]

    def shown_env(self, show_secrets: bool = False, conceal: Conceal | None = None) -> dict[str, str]:
        """The env with secret values masked (or as ``conceal`` renders them)."""
        how = _conceal(show_secrets, conceal)
        free = self._free(how)
        return {k: free(v) for k, v in self.secrets.conceal_env(self.env, how).items()}

    def shown_command(self, show_secrets: bool = False,
                      conceal: Conceal | None = None) -> list[str]:
        """The command with the values of secret flags masked (``--api-key ********``), and
        secret values inside any other token (``sh -c "... $KEY ..."``)."""
        how = _conceal(show_secrets, conceal)
        free = self._free(how)  # once: it collects the spec's secret values
        return [free(t) for t in self.secrets.conceal_args(self.command, how)]

    def shown_entrypoint(self, show_secrets: bool = False,
                         conceal: Conceal | None = None) -> list[str]:
        how = _conceal(show_secrets, conceal)
        free = self._free(how)
        return [free(t) for t in self.secrets.conceal_args(self.entrypoint, how)]

    def shown_mounts(self, show_secrets: bool = False,
                     conceal: Conceal | None = None) -> list[MountSpec]:
        free = self._free(_conceal(show_secrets, conceal))
        return [MountSpec(free(m.source), free(m.target), m.read_only) for m in self.mounts]

    def shown_labels(self, show_secrets: bool = False,
                     conceal: Conceal | None = None) -> dict[str, str]:
        free = self._free(_conceal(show_secrets, conceal))
        return {k: free(v) for k, v in self.labels.items()}

    def _free(self, conceal: Conceal) -> Callable[[str], str]:
        """Conceals the secret values (and URL passwords) inside any string of this spec."""
        if conceal is shown:
            return shown
        values = sorted({v for v in self.secret_values() if len(v) >= MIN_REDACT},
                        key=len, reverse=True)
        return lambda text: conceal_text(text, values, conceal)

    def secret_values(self) -> list[str]:
        return self.secrets.values(self.env, self.entrypoint) + \
            self.secrets.values({}, self.command)

    def to_json(self, show_secrets: bool = False, conceal: Conceal | None = None) -> dict[str, Any]:
        """The plan's record of the rank, Docker's options beside the rest, keys in the order
        they always had (the plan hash is taken over it: a running cluster's stays what it was);
        keys added since appear only when set."""
        d = self.docker
        out: dict[str, Any] = {
            "name": self.name, "image": self.image,
            "entrypoint": self.shown_entrypoint(show_secrets, conceal),
            "command": self.shown_command(show_secrets, conceal),
            "env": self.shown_env(show_secrets, conceal),
            "mounts": [asdict(m) for m in self.shown_mounts(show_secrets, conceal)],
            "shm_size": self.shm_size, "network_mode": d.network_mode, "ipc_mode": d.ipc_mode,
            "gpus": self.gpus, "devices": list(self.devices), "cap_add": list(d.cap_add),
            "ulimits": dict(d.ulimits), "labels": self.shown_labels(show_secrets, conceal),
        }
        if self.memory_limit is not None:  # only when set: a plan without one hashes as before
            out["memory_limit"] = self.memory_limit
        return out


def _conceal(show_secrets: bool, conceal: Conceal | None) -> Conceal:
    return conceal if conceal is not None else (shown if show_secrets else masked)
