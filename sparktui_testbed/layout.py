"""What a testbed is on disk: the Node and Testbed records and the state dir layout.

testbed.json is the Testbed record serialised; every later command (status, down, rekey, the
test fixture reusing a running testbed) starts from it, and Paths derives every file and
namespace name of a node from its index alone, so a half-built testbed can still be found and
torn down. The state dir lock serialises concurrent users (pytest workers, benches, a person).
cluster.toml, in sparktui's own cluster file format, is how sparktui itself is pointed at it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .config import (
    DEFAULT_STATE_DIR,
    FIRST_HOST,
    LOGIN,
    LOGIN_HOST,
    LOGIN_INDEX,
    LOGIN_NETNS,
    LOGIN_VETH,
    NODE_NETNS,
    NODE_VETH,
    SLURM_PARTITION,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    STATE_ENV,
    SUBNET_PREFIX,
    T_LOCK,
)
from .runner import TestbedError


@dataclasses.dataclass
class Node:
    __test__ = False

    name: str
    index: int
    ip: str
    netns: str
    netns_path: str
    mntns: str
    dir: str
    home: str
    run_dir: str
    ssh_port: int
    ssh_pidfile: str
    sshd_config: str
    sshd_log: str
    host_key: str
    docker_socket: str  # as seen from the root namespace
    docker_socket_in_node: str  # as seen on the node (in the cluster file)
    docker_pidfile: str
    docker_data_root: str
    docker_exec_root: str
    docker_log: str
    storage_driver: str = ""

    @property
    def veth(self) -> str:
        """The root namespace's end of the node's veth pair."""
        return LOGIN_VETH if self.index == LOGIN_INDEX else NODE_VETH.format(index=self.index)


@dataclasses.dataclass
class Slurm:
    """The testbed's Slurm cluster: one munged and the slurmctld on the login node, one slurmd
    per node. Every path is under <state>/slurm except ``shared``, the folder that the login
    node and every node see at this same absolute path (as a cluster's shared filesystem)."""

    __test__ = False

    login: Node
    conf: str  # what SLURM_CONF points at, on the login node and on every node
    dir: str
    shared: str
    partition: str = SLURM_PARTITION
    ctld_port: int = SLURMCTLD_PORT
    slurmd_port: int = SLURMD_PORT
    second_user: str = ""

    @property
    def munge_dir(self) -> str:  # the key and the seed: root only
        return os.path.join(self.dir, "munge")

    @property
    def munge_key(self) -> str:
        return os.path.join(self.munge_dir, "munge.key")

    @property
    def munge_run(self) -> str:  # the socket every user reaches
        return os.path.join(self.dir, "munge-run")

    @property
    def munge_socket(self) -> str:
        return os.path.join(self.munge_run, "munge.socket.2")

    @property
    def munge_pidfile(self) -> str:
        return os.path.join(self.munge_run, "munged.pid")

    @property
    def state_save(self) -> str:
        return os.path.join(self.dir, "ctld")

    @property
    def log_dir(self) -> str:
        return os.path.join(self.dir, "log")

    @property
    def pid_dir(self) -> str:
        return os.path.join(self.dir, "run")

    @property
    def ctld_pidfile(self) -> str:
        return os.path.join(self.pid_dir, "slurmctld.pid")

    @property
    def ctld_log(self) -> str:
        return os.path.join(self.log_dir, "slurmctld.log")

    @property
    def epilog(self) -> str:
        return os.path.join(self.dir, "epilog.sh")

    @property
    def known_hosts(self) -> str:
        """Every node's host key and the login node's, for a Slurm cluster file (the testbed's
        known_hosts lists exactly the nodes of cluster.toml, as its SSH cluster file has them)."""
        return os.path.join(self.dir, "known_hosts")

    @property
    def cluster_file(self) -> str:
        """sparktui's cluster file for this Slurm cluster (``kind = "slurm"``)."""
        return os.path.join(self.dir, "cluster.toml")

    @property
    def hosts(self) -> str:
        return os.path.join(self.dir, "hosts")

    @property
    def resolv(self) -> str:
        return os.path.join(self.dir, "resolv.conf")

    def slurmd_pidfile(self, node: Node) -> str:
        return os.path.join(self.pid_dir, f"slurmd.{node.name}.pid")

    def slurmd_log(self, node: Node) -> str:
        return os.path.join(self.log_dir, f"slurmd.{node.name}.log")

    def slurmd_spool(self, node: Node) -> str:
        return os.path.join(self.dir, "spool", node.name)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Slurm:
        d = dict(d)
        d["login"] = Node(**d["login"])
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclasses.dataclass
class Testbed:
    __test__ = False

    state_dir: str
    nodes: list[Node]
    bridge: str
    bridge_ip: str
    identity: str
    identity_pub: str
    authorized_keys: str
    known_hosts: str
    cluster_file: str
    info_file: str
    image: str
    image_id: str
    image_inputs: str
    image_archive: str
    storage_driver: str
    created: float = 0.0
    reused: bool = False
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    slurm: Slurm | None = None

    def node(self, which: str | int) -> Node:
        return self.nodes[node_index(which, len(self.nodes))]

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("reused", None)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Testbed:
        d = dict(d)
        d["nodes"] = [Node(**n) for n in d.get("nodes", [])]
        d["slurm"] = Slurm.from_json(d["slurm"]) if d.get("slurm") else None
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


class Paths:
    """Every path of the state dir, and a node's record from its index."""

    def __init__(self, state_dir: str | os.PathLike[str] | None) -> None:
        self.sd = resolve_state_dir(state_dir)
        sd = self.sd
        self.lock = sd / ".lock"
        self.identity = sd / "id_ed25519"
        self.identity_pub = sd / "id_ed25519.pub"
        self.authorized_keys = sd / "authorized_keys"
        self.known_hosts = sd / "known_hosts"
        self.cluster_file = sd / "cluster.toml"
        self.info = sd / "testbed.json"
        self.cache = sd / "cache"
        self.ns_dir = sd / "ns"
        self.docker_cli = sd / "docker-cli"
        self.slurm_dir = sd / "slurm"
        self.shared = sd / "shared"

    def node(self, i: int) -> Node:
        return self._host(f"node{i}", i, f"{SUBNET_PREFIX}{FIRST_HOST + i}", NODE_NETNS.format(index=i))

    def login(self) -> Node:
        """The Slurm login node: namespaces, sshd and files like a node's, no dockerd."""
        return self._host(LOGIN, LOGIN_INDEX, f"{SUBNET_PREFIX}{LOGIN_HOST}", LOGIN_NETNS)

    def slurm(self, second_user: str = "") -> Slurm:
        return Slurm(
            login=self.login(),
            conf=str(self.slurm_dir / "slurm.conf"),
            dir=str(self.slurm_dir),
            shared=str(self.shared),
            second_user=second_user,
        )

    def _host(self, name: str, i: int, ip: str, netns: str) -> Node:
        d = self.sd / name
        run = d / "run"
        return Node(
            name=name,
            index=i,
            ip=ip,
            netns=netns,
            netns_path=f"/run/netns/{netns}",
            mntns=str(self.ns_dir / name),
            dir=str(d),
            home=str(d / "home"),
            run_dir=str(run),
            ssh_port=22,
            ssh_pidfile=str(d / "sshd.pid"),
            sshd_config=str(d / "sshd_config"),
            sshd_log=str(d / "sshd.log"),
            host_key=str(d / "ssh_host_ed25519_key"),
            docker_socket=str(run / "docker.sock"),
            docker_socket_in_node="/var/run/docker.sock",
            docker_pidfile=str(d / "docker.pid"),
            docker_data_root=str(d / "docker"),
            docker_exec_root=str(d / "exec"),
            docker_log=str(d / "dockerd.log"),
        )


def resolve_state_dir(state_dir: str | os.PathLike[str] | None = None) -> Path:
    sd = state_dir or os.environ.get(STATE_ENV) or DEFAULT_STATE_DIR
    return Path(os.path.realpath(os.path.abspath(os.fspath(sd))))


def node_index(which: str | int, n: int | None = None) -> int:
    if isinstance(which, int):
        i = which
    else:
        s = str(which).strip()
        m = re.fullmatch(r"(?:node)?(\d+)", s)
        if m:
            i = int(m.group(1))
        elif s.startswith(SUBNET_PREFIX) and s[len(SUBNET_PREFIX) :].isdigit():
            i = int(s[len(SUBNET_PREFIX) :]) - FIRST_HOST
        else:
            raise TestbedError(f"unknown node {which!r} (use node0, 0 or {SUBNET_PREFIX}11)")
    if i < 0 or (n is not None and i >= n):
        raise TestbedError(f"no node {which!r} in this testbed ({n} nodes)")
    return i


@contextlib.contextmanager
def locked(paths: Paths) -> Iterator[None]:
    paths.sd.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + T_LOCK
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    raise TestbedError(
                        f"lock {paths.lock}: held by another process for more than {T_LOCK:.0f}s"
                    ) from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)


def _toml_str(s: str) -> str:
    return json.dumps(s)


def _cluster_toml(head: list[str], known_hosts: str, paths: Paths, nodes: Sequence[Node],
                  kind_table: Sequence[str] = ()) -> str:
    """A cluster file of the testbed's nodes: ``head`` (name, kind), SSH as root with the
    testbed's key against ``known_hosts``, the kind's own table, each node's own dockerd."""
    out = [
        *head,
        'hf_cache = "/home/hf"',
        "dist_init_port = 25000",
        "",
        "[ssh]",
        'user = "root"',
        f"identity = {_toml_str(str(paths.identity))}",
        f"known_hosts = {_toml_str(known_hosts)}",
        "",
        *kind_table,
        "[docker]",
        f"socket = {_toml_str(nodes[0].docker_socket_in_node)}  # on every node",
        'gpus = "none"',
    ]
    for node in nodes:
        out += [
            "",
            "[[nodes]]",
            f"name = {_toml_str(node.name)}",
            f"host = {_toml_str(node.ip)}",
            f"fabric_ip = {_toml_str(node.ip)}",
        ]
    return "\n".join(out) + "\n"


def write_cluster_file(paths: Paths, nodes: Sequence[Node]) -> None:
    head = ["# sparktui cluster file for the local testbed (generated by sparktui_testbed)",
            'name = "testbed"']
    paths.cluster_file.write_text(_cluster_toml(head, str(paths.known_hosts), paths, nodes))


def write_slurm_cluster_file(s: Slurm, paths: Paths, nodes: Sequence[Node]) -> None:
    """The same nodes as a Slurm cluster: the login node over SSH (its host key in Slurm's
    known_hosts), each node's own dockerd as its tasks see it, the shared folder."""
    head = ["# sparktui cluster file for the testbed's Slurm (generated by sparktui_testbed)",
            'name = "testbed-slurm"', 'kind = "slurm"']
    table = ["[slurm]  # [ssh] above reaches its login node",
             f"login = {_toml_str(s.login.ip)}",
             f"partition = {_toml_str(s.partition)}",
             'time = "2:00:00"',
             f"shared_dir = {_toml_str(s.shared)}",
             ""]
    Path(s.cluster_file).write_text(_cluster_toml(head, s.known_hosts, paths, nodes, table))
