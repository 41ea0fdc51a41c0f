"""The cluster: nodes in rank order, how to reach them, and what each one has.

A cluster file is optional. Without one, sparktui plans on the built-in local cluster: this
machine, as many local nodes as the recipe needs, rank processes instead of containers.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from sparktui.core.errors import ClusterError, user_home
from sparktui.core.kinds import KINDS, LOCAL, SSH, Kind, kind_of
from sparktui.core.limits import MAX_NODES
from sparktui.core.nodevalues import unsafe_sentence
from sparktui.core.ownership import MAX_OWNER, OWNER_PATTERN, default_owner
from sparktui.core.problems import Problem
from sparktui.core.tomlsource import TomlSource, parse_toml, read_toml
from sparktui.core.units import parse_duration
from sparktui.core.validation import StrictModel, problems_from

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
"""Node and cluster names: they name key files and appear in labels (``core.names``)."""
LOCAL_CLUSTER_NAME = "local"
LOCAL_HEAD = "127.0.0.1"
HEALTH_INTERVAL_S = 10.0
"""How often a ready rank is probed unless ``[health] interval`` says otherwise (a booting rank:
every ``HEALTH_BOOTING_S``). Each probe is a line in the engine's access log."""
HEALTH_BOOTING_S = 1.0


class SshSettings(StrictModel):
    """How to reach a node. Host keys are always verified against ``known_hosts``."""

    user: str | None = Field(default=None, description="Login user (default: the current user)")
    identity: str | None = Field(default=None, description="Private key file")
    known_hosts: str = Field(default="~/.ssh/known_hosts",
                             description="Host keys to verify against; never disabled")
    connect_timeout: float = Field(default=10.0, gt=0, le=600)


class SshOverride(StrictModel):
    user: str | None = None
    identity: str | None = None
    known_hosts: str | None = None
    connect_timeout: float | None = Field(default=None, gt=0, le=600)


def _node_path(value: str | None) -> str | None:
    """A folder or socket on a node: absolute, since nothing expands ``~`` there."""
    if value is not None and not value.startswith("/"):
        why = ("~ is not expanded on the nodes" if value.startswith("~")
               else "a relative path has no fixed meaning on a node")
        raise ValueError(f"{value[:200]!r} must be an absolute path: {why}; write the full path "
                         "(for example /home/<user>/.cache/huggingface)")
    return value


NodePath = Annotated[str, AfterValidator(_node_path)]


class DockerSettings(StrictModel):
    """The node's Docker engine, reached through the SSH connection."""

    socket: NodePath = Field(default="/var/run/docker.sock", description="Engine socket on the node")
    gpus: str = Field(default="all", description='"all", "none", a count or device ids')
    devices: list[str] = Field(default_factory=list)
    cap_add: list[str] = Field(default_factory=list)
    ulimits: dict[str, int] = Field(default_factory=dict)


class DockerOverride(StrictModel):
    socket: NodePath | None = None
    gpus: str | None = None
    devices: list[str] | None = None
    cap_add: list[str] | None = None
    ulimits: dict[str, int] | None = None


class HealthSettings(StrictModel):
    """The health probes (sent through each node's SSH connection, to the engine's port)."""

    interval: str | int | float | None = Field(
        default=None, description='How often a ready rank is probed, e.g. "10s" (default 10s)')

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: str | int | float | None) -> str | int | float | None:
        if value is not None and parse_duration(value) < HEALTH_BOOTING_S:
            raise ValueError(f"must be at least {HEALTH_BOOTING_S:g}s (a booting rank is probed "
                             "every second already)")
        return value

    @property
    def interval_s(self) -> float | None:
        return parse_duration(self.interval) if self.interval is not None else None


class NodeSpec(StrictModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=128)
    host: str = Field(description='SSH address, "host" or "host:port"')
    fabric_ip: str | None = Field(default=None,
                                  description="Address used in --dist-init-addr when head")
    hf_cache: NodePath | None = None

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        addr, port = _split_host(value)
        if not addr or any(c.isspace() or c in "/\\@" for c in addr) or addr.startswith("-"):
            raise ValueError(f"{value[:200]!r} is not a host name or address")
        if not 1 <= port <= 65535:
            raise ValueError(f"port {port} is not a TCP port (1-65535)")
        return value
    port_offset: int = Field(default=0, ge=0,
                             description="Added to the recipe's port (several nodes on one host)")
    ssh: SshOverride = Field(default_factory=SshOverride)
    docker: DockerOverride = Field(default_factory=DockerOverride)


class ClusterSpec(StrictModel):
    """The cluster file's schema."""

    name: str = Field(pattern=NAME_PATTERN, max_length=128)
    kind: str = Field(default=SSH, description='How ranks run: "ssh" (Docker on each node, '
                      'reached over SSH), "local" (processes on this machine), or another '
                      'registered runtime (backend/runtimes)')
    owner: str | None = Field(
        default=None, max_length=MAX_OWNER,
        description="Who the containers sparktui starts belong to (their sparktui.owner label); "
                    "default: your user@machine. Other owners' containers are left alone")
    hf_cache: NodePath | None = Field(
        default=None, description="HF cache folder on the nodes, absolute (a node may override it)")
    dist_init_port: int = Field(default=25000, ge=1, le=65535)
    ssh: SshSettings = Field(default_factory=SshSettings)
    docker: DockerSettings = Field(default_factory=DockerSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    nodes: list[NodeSpec] = Field(min_length=1, max_length=MAX_NODES)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in KINDS:
            raise ValueError(f"{value[:200]!r} is no runtime: use one of {', '.join(sorted(KINDS))}")
        return value

    @field_validator("owner")
    @classmethod
    def _owner(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(OWNER_PATTERN, value):
            raise ValueError(f"{value[:200]!r} is no owner name: write letters, digits and . _ @ + -, "
                             "starting with a letter or digit (for example alice@jumphost)")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> ClusterSpec:
        seen: set[str] = set()
        for node in self.nodes:
            if node.name in seen:
                raise ValueError(f"node name {node.name!r} appears twice")
            seen.add(node.name)
        return self


@dataclass(frozen=True)
class Node:
    """A node with the cluster defaults applied."""

    index: int
    name: str
    host: str
    ssh_port: int
    fabric_ip: str
    hf_cache: str
    port_offset: int
    ssh: SshSettings
    docker: DockerSettings


@dataclass(frozen=True)
class Cluster:
    name: str
    kind: str  # a key of ``core.kinds.KINDS`` (and of ``backend.runtimes.RUNTIMES``)
    dist_init_port: int
    nodes: tuple[Node, ...]
    path: Path | None = None
    health_interval: float | None = None  # [health] interval in seconds; None: not set here
    owner: str = ""  # the sparktui.owner label of what this operator starts (default_owner())
    source: TomlSource | None = field(default=None, compare=False, repr=False)  # for sentences
    settings: BaseModel | None = None  # the kind's own table (``Kind.table``), when it has one

    @property
    def probe_interval(self) -> float:
        """Seconds between two probes of a ready rank."""
        return self.health_interval if self.health_interval is not None else HEALTH_INTERVAL_S

    @property
    def traits(self) -> Kind:
        """What the kind of this cluster means for plans and checks (``core.kinds``)."""
        return kind_of(self.kind)

    @property
    def head(self) -> Node:
        return self.nodes[0]

    def ssh_problem(self, node: Node, key: str, sentence: str) -> Problem:
        """``sentence`` at ``nodes[i].ssh.<key>`` when that node sets it, else at ``ssh.<key>``
        (with its line when the cluster came from a file)."""
        if self.source is None:
            return Problem(sentence, key=f"ssh.{key}", code="access")
        raw_nodes = self.source.data.get("nodes", [])
        raw = raw_nodes[node.index] if node.index < len(raw_nodes) else {}
        own = isinstance(raw, dict) and isinstance(raw.get("ssh"), dict) and key in raw["ssh"]
        path: tuple[str | int, ...] = ("nodes", node.index, "ssh", key) if own else ("ssh", key)
        return self.source.problem(path, sentence, code="access")


def _split_host(host: str) -> tuple[str, int]:
    """``(address, port)``; a port that is no number is -1 (the validator says so)."""
    if host.startswith("["):  # [::1]:2222
        addr, _, rest = host[1:].partition("]")
        if not rest:
            return addr, 22
        return addr, _port(rest[1:]) if rest.startswith(":") else -1
    if host.count(":") == 1:
        addr, port = host.split(":")
        return addr, _port(port)
    return host, 22


def _port(text: str) -> int:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else -1


def spec_model(kind: str) -> type[ClusterSpec]:
    """The cluster file's schema for ``kind``: ``ClusterSpec`` plus the kind's own table when it
    has one (``Kind.table``), so its keys are checked, located and suggested like the rest."""
    traits = KINDS.get(kind)
    return ClusterSpec if traits is None or traits.table is None else _with_table(kind, traits.table)


@cache
def _with_table(kind: str, table: type[BaseModel]) -> type[ClusterSpec]:
    model: type[ClusterSpec] = create_model(  # type: ignore[call-overload]
        f"ClusterSpec_{kind}", __base__=ClusterSpec,
        **{kind: (table, Field(description=f"How the {kind} runtime runs the ranks"))})
    return model


def _resolve(spec: ClusterSpec, path: Path | None, source: TomlSource | None = None) -> Cluster:
    nodes = []
    for i, n in enumerate(spec.nodes):
        addr, port = _split_host(n.host)
        ssh = spec.ssh.model_copy(update=n.ssh.model_dump(exclude_none=True))
        docker = spec.docker.model_copy(update=n.docker.model_dump(exclude_none=True))
        nodes.append(Node(
            index=i, name=n.name, host=addr, ssh_port=port,
            fabric_ip=n.fabric_ip or addr,
            hf_cache=n.hf_cache or spec.hf_cache or "/",
            port_offset=n.port_offset, ssh=ssh, docker=docker,
        ))
    settings = getattr(spec, spec.kind, None)
    return Cluster(name=spec.name, kind=spec.kind, dist_init_port=spec.dist_init_port,
                   nodes=tuple(nodes), path=path, health_interval=spec.health.interval_s,
                   owner=spec.owner or default_owner(), source=source,
                   settings=settings if isinstance(settings, BaseModel) else None)


def cluster_from_source(source: TomlSource) -> Cluster:
    kind = source.data.get("kind", SSH)
    model = spec_model(kind) if isinstance(kind, str) else ClusterSpec
    try:
        spec = model.model_validate(source.data)
    except ValidationError as exc:
        raise ClusterError(problems_from(exc, source, model)) from None
    shell = kind_of(spec.kind).node_shell
    if shell and spec.hf_cache is None:
        missing = [i for i, n in enumerate(spec.nodes) if n.hf_cache is None]
        if missing:
            names = ", ".join(spec.nodes[i].name for i in missing)
            raise ClusterError([source.problem(
                ("hf_cache",), f"missing for {names}: set hf_cache to the nodes' Hugging Face "
                "cache folder, absolute (for example hf_cache = \"/home/<user>/.cache/huggingface\"); "
                "sparktui cannot expand ~ on a node before it connects")])
    if shell:
        problems = _node_value_problems(spec, source)
        if problems:
            raise ClusterError(problems)
    return _resolve(spec, source.path, source)


def _node_value_problems(spec: ClusterSpec, source: TomlSource) -> list[Problem]:
    """Folders and sockets that reach a node's shell hold only safe characters (see
    ``core.nodevalues``); where no shell is involved (the local cluster) any value goes."""
    found: list[tuple[tuple[str | int, ...], str | None]] = [
        (("hf_cache",), spec.hf_cache), (("docker", "socket"), spec.docker.socket)]
    for i, n in enumerate(spec.nodes):
        found += [(("nodes", i, "hf_cache"), n.hf_cache),
                  (("nodes", i, "docker", "socket"), n.docker.socket)]
    problems = []
    for path, value in found:
        why = unsafe_sentence(value) if value is not None else None
        if why is not None:
            problems.append(source.problem(path, why))
    return problems


def load_cluster(path: Path) -> Cluster:
    return cluster_from_source(read_toml(path, ClusterError))


def load_cluster_text(text: str, path: Path | None = None) -> Cluster:
    return cluster_from_source(parse_toml(text, path, ClusterError))


def default_hf_cache() -> str:
    """Where Hugging Face tools keep their cache on this machine (absolute; ``SetupError`` when
    there is no home folder to find it in)."""
    env = os.environ.get("HF_HOME")
    if env and not env.startswith("~"):
        return os.path.abspath(env)
    home = user_home()  # before expanduser, which leaves ~ as it is when there is no home
    return os.path.expanduser(env) if env else str(home / ".cache" / "huggingface")


def local_cluster(nodes: int) -> Cluster:
    """This machine as ``nodes`` local nodes; each rank gets its own port (``port + rank``)."""
    spec = ClusterSpec(
        name=LOCAL_CLUSTER_NAME,
        kind=LOCAL,
        hf_cache=default_hf_cache(),
        docker=DockerSettings(gpus="none"),
        nodes=[NodeSpec(name=f"local{i}", host="localhost", fabric_ip=LOCAL_HEAD, port_offset=i)
               for i in range(max(1, nodes))],
    )
    return _resolve(spec, None)


def default_cluster_path(config_dir: Path) -> Path | None:
    """``$SPARKTUI_CLUSTER``, else ``<config>/cluster.toml`` when it exists, else None (local)."""
    env = os.environ.get("SPARKTUI_CLUSTER")
    if env:
        return Path(env).expanduser()
    candidate = config_dir / "cluster.toml"
    return candidate if candidate.is_file() else None

