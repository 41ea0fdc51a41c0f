#!/usr/bin/env python3
"""A real local test cluster for sparktui: N "nodes" on this one machine.

Every node ``node{i}`` is

* a network namespace ``sptb-node{i}`` whose ``eth0`` (a veth) sits on the bridge
  ``sptb-br0`` (10.250.0.1/24) in the root namespace, with address 10.250.0.{11+i}/24;
* a persistent private mount namespace (``<state>/ns/node{i}``) in which ``/home`` is
  ``<state>/node{i}/home`` and ``/run`` (so ``/var/run``) is ``<state>/node{i}/run``;
* its own OpenSSH ``sshd`` on 10.250.0.{11+i}:22 (own ed25519 host key, root login by key);
* its own ``dockerd`` (``/var/run/docker.sock`` inside the node, which is
  ``<state>/node{i}/run/docker.sock`` from the root namespace) holding the image
  ``sparktui-demo:latest`` (busybox + Debian's CPython), same image id on every node.

Both daemons run inside the node's network and mount namespaces (``nsenter``). The state dir
(default ``/run/sparktui-testbed`` or ``$SPARKTUI_TESTBED``) holds the client key,
``known_hosts``, ``cluster.toml`` (sparktui's cluster file format) and ``testbed.json``.

Usage (as root)::

    python3 scripts/testbed.py up [--nodes N] [--state DIR]
    python3 scripts/testbed.py status [--state DIR] [--json]
    python3 scripts/testbed.py down [--state DIR] [--purge]
    python3 scripts/testbed.py stop-sshd NODE | start-sshd NODE
    python3 scripts/testbed.py rekey NODE [--restore] [--update-known-hosts]

Importable: ``up(n, state_dir)``, ``down(state_dir)``, ``status(state_dir)``,
``load(state_dir)``, ``stop_sshd(state_dir, node)``, ``start_sshd(state_dir, node)``,
``rekey(state_dir, node, restore=False)``, ``check_host()``.

Standard library only; Python 3.10+.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import http.client
import io
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

DEFAULT_STATE_DIR = "/run/sparktui-testbed"
STATE_ENV = "SPARKTUI_TESTBED"
STORAGE_DRIVER_ENV = "SPARKTUI_TESTBED_STORAGE_DRIVER"

BRIDGE = "sptb-br0"
SUBNET_PREFIX = "10.250.0."
BRIDGE_IP = SUBNET_PREFIX + "1"
PREFIX_LEN = 24
FIRST_HOST = 11
MAX_NODES = 64
NETNS_RE = re.compile(r"^sptb-node(\d+)$")
VETH_RE = re.compile(r"^sptb-v(\d+)$")

IMAGE = "sparktui-demo:latest"
IMAGE_RECIPE_VERSION = "1"  # bump to force an image rebuild
IMAGE_CREATED = "2024-01-01T00:00:00Z"
IMAGE_MTIME = 1704067200  # every file in the image gets this mtime (reproducible layer)
IMAGE_ENV = [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONPATH=/opt/sparktui",
    "PYTHONUNBUFFERED=1",
    "LANG=C.UTF-8",
]
DEMO_SRC = Path(__file__).resolve().parent.parent / "sparktui" / "demo"

DAEMON_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SSHD = "/usr/sbin/sshd"
VERIFY_PORT = 29999

# timeouts (seconds); every wait is capped
T_CMD = 30.0
T_SSHD = 15.0
T_DOCKERD = 60.0
T_STOP = 15.0
T_LOAD = 180.0
T_RUN = 60.0
T_LOCK = 300.0

_T0 = time.monotonic()
_verbose = False


class TestbedError(RuntimeError):
    """A step failed; the message names the node (if any) and the step."""

    __test__ = False  # not a pytest test class


# ----------------------------------------------------------------------------- data


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

    def node(self, which: str | int) -> Node:
        return self.nodes[_node_index(which, len(self.nodes))]

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("reused", None)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Testbed:
        d = dict(d)
        d["nodes"] = [Node(**n) for n in d.get("nodes", [])]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


class _Paths:
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

    def node(self, i: int) -> Node:
        d = self.sd / f"node{i}"
        run = d / "run"
        return Node(
            name=f"node{i}",
            index=i,
            ip=f"{SUBNET_PREFIX}{FIRST_HOST + i}",
            netns=f"sptb-node{i}",
            netns_path=f"/run/netns/sptb-node{i}",
            mntns=str(self.ns_dir / f"node{i}"),
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


def _node_index(which: str | int, n: int | None = None) -> int:
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


# ----------------------------------------------------------------------------- utils


def _log(msg: str) -> None:
    if _verbose:
        print(f"[testbed {time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def _env() -> dict[str, str]:
    env = {"PATH": DAEMON_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    return env


def _run(
    cmd: Sequence[str],
    *,
    what: str,
    timeout: float = T_CMD,
    check: bool = True,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    try:
        cp = subprocess.run(
            list(cmd),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=env or _env(),
            cwd="/",
        )
    except subprocess.TimeoutExpired as e:
        raise TestbedError(f"{what}: timed out after {timeout:.0f}s: {shlex.join(cmd)}") from e
    except FileNotFoundError as e:
        raise TestbedError(f"{what}: command not found: {cmd[0]}") from e
    if check and cp.returncode != 0:
        err = (cp.stderr or cp.stdout or b"").decode(errors="replace").strip()
        raise TestbedError(f"{what}: `{shlex.join(cmd)}` exited {cp.returncode}: {err[-2000:]}")
    return cp


def _tail(path: str | Path, lines: int = 15) -> str:
    try:
        data = Path(path).read_bytes()[-8000:].decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join("    " + ln for ln in data.splitlines()[-lines:])


@contextlib.contextmanager
def _step(node: str | None, step: str) -> Iterator[None]:
    try:
        yield
    except TestbedError as e:
        prefix = f"{node}: {step}" if node else step
        if str(e).startswith(prefix):
            raise
        raise TestbedError(f"{prefix}: {e}") from e
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        prefix = f"{node}: {step}" if node else step
        raise TestbedError(f"{prefix}: {type(e).__name__}: {e}") from e


_R = TypeVar("_R")


def _parallel(items: Sequence[Any], fn: Callable[[Any], _R]) -> list[_R]:
    """Run fn over items in threads; re-raise the first failure (others are reported too)."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(items)) as ex:
        futs = [ex.submit(fn, x) for x in items]
        results: list[_R] = []
        errors: list[BaseException] = []
        for f in futs:
            try:
                results.append(f.result())
            except BaseException as e:  # collected and re-raised below
                errors.append(e)
        if errors:
            if len(errors) > 1:
                msgs = "\n".join(f"  - {e}" for e in errors)
                raise TestbedError(f"{len(errors)} nodes failed:\n{msgs}") from errors[0]
            raise errors[0]
        return results


@contextlib.contextmanager
def _locked(paths: _Paths) -> Iterator[None]:
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


# --- processes


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    st = _proc_state(pid)
    return st is not None and st not in ("Z", "X")


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _read_pid(path: str | Path) -> int | None:
    try:
        txt = Path(path).read_text().strip()
    except OSError:
        return None
    return int(txt) if txt.isdigit() else None


def _daemon_pid(pidfile: str | Path, marker: str) -> int | None:
    """The pid in pidfile if that process is alive and its command line contains marker."""
    pid = _read_pid(pidfile)
    if pid and _alive(pid) and any(marker in a for a in _cmdline(pid)):
        return pid
    return None


def _ns_inode(pid: int | str, kind: str) -> int | None:
    try:
        link = os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None
    m = re.search(r"\[(\d+)\]", link)
    return int(m.group(1)) if m else None


_NSFS_DEV: int | None = None


def _nsfs_dev() -> int:
    global _NSFS_DEV
    if _NSFS_DEV is None:
        _NSFS_DEV = os.stat("/proc/self/ns/net").st_dev
    return _NSFS_DEV


def _ns_file_inode(path: str | Path) -> int | None:
    """Inode of the namespace bound at path, None if path is not a namespace handle."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino if st.st_dev == _nsfs_dev() else None


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _reap() -> None:
    """Reap exited children of this process (daemons we spawned via sh are not ours)."""
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break


def _wait_gone(pids: Sequence[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = [p for p in pids if _alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        _reap()
        left = [p for p in left if _alive(p)]
    return left


def _terminate(pids: Sequence[int], timeout: float) -> list[int]:
    """SIGTERM, wait up to timeout, then SIGKILL and wait 5 s. Returns survivors."""
    pids = [p for p in pids if _alive(p)]
    for p in pids:
        _kill(p, signal.SIGTERM)
    left = _wait_gone(pids, timeout)
    for p in left:
        _kill(p, signal.SIGKILL)
    return _wait_gone(left, 5.0)


def _all_pids() -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]


def _pid_cgroups(pid: int) -> list[str]:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    return [ln.split(":", 2)[2] for ln in lines if ln.count(":") >= 2]


def _node_pids(node: Node) -> list[int]:
    """Every process living in the node: its netns, its mount ns or its cgroup parent."""
    net = _ns_file_inode(node.netns_path)
    mnt = _ns_file_inode(node.mntns)
    cg = f"/{node.netns}"
    found = []
    for pid in _all_pids():
        if (
            (net is not None and _ns_inode(pid, "net") == net)
            or (mnt is not None and _ns_inode(pid, "mnt") == mnt)
            or any(c == cg or c.startswith(cg + "/") for c in _pid_cgroups(pid))
        ):
            found.append(pid)
    return found


def _spawn_in_node(node: Node, argv: Sequence[str], log: str) -> int:
    """Start a daemon inside the node's net + mount namespaces, detached (re-parented to
    init, own session, output appended to log). nsenter execs the daemon, so the returned
    pid is the daemon's pid."""
    cmd = [
        "nsenter",
        f"--net={node.netns_path}",
        f"--mount={node.mntns}",
        "--",
        *argv,
    ]
    script = '"$@" </dev/null >>"$0" 2>&1 &\necho $!'
    try:
        cp = subprocess.run(
            ["sh", "-c", script, log, *cmd],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            env=_env(),
            cwd="/",
            start_new_session=True,
            check=True,
        )
    except (subprocess.SubprocessError, OSError) as e:
        raise TestbedError(f"spawn {argv[0]}: {e}") from e
    return int(cp.stdout.decode().strip().splitlines()[-1])


# --- mounts


def _unescape_mount(s: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def _mounts() -> list[tuple[str, str]]:
    """(mountpoint, fstype) of the root mount namespace (this process's), in mount order."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        try:
            sep = parts.index("-")
        except ValueError:
            continue
        out.append((_unescape_mount(parts[4]), parts[sep + 1]))
    return out


def _is_mountpoint(path: str | Path) -> bool:
    p = str(path)
    return any(mp == p for mp, _ in _mounts())


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _umount_under(root: Path) -> list[str]:
    failed = []
    mps = sorted({mp for mp, _ in _mounts() if _under(mp, str(root))}, key=lambda p: (-p.count("/"), p))
    for mp in mps:
        for _ in range(10):  # a path can be mounted over several times
            if not _is_mountpoint(mp):
                break
            cp = _run(["umount", mp], what="umount", check=False)
            if cp.returncode != 0:
                cp = _run(["umount", "-l", mp], what="umount", check=False)
                if cp.returncode != 0:
                    failed.append(mp)
                    break
    return failed


def _cgroup_roots() -> list[str]:
    return [mp for mp, fs in _mounts() if fs in ("cgroup", "cgroup2")]


def _rm_cgroups(name: str) -> None:
    for root in _cgroup_roots():
        top = Path(root) / name
        if not top.is_dir():
            continue
        dirs = [Path(dp) for dp, _, _ in os.walk(top)]
        for d in sorted(dirs, key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                d.rmdir()


# --- docker engine API over the unix socket (stdlib)


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _docker_api(
    sock: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, bytes]:
    conn = _UnixHTTPConnection(sock, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _docker_ping(sock: str, timeout: float = 2.0) -> bool:
    try:
        status, body = _docker_api(sock, "GET", "/_ping", timeout=timeout)
    except OSError:
        return False
    return status == 200 and body.strip() == b"OK"


def _docker_image_id(sock: str, image: str = IMAGE) -> str | None:
    try:
        status, body = _docker_api(sock, "GET", f"/images/{image}/json", timeout=10)
    except OSError:
        return None
    if status != 200:
        return None
    return str(json.loads(body).get("Id") or "") or None


def _docker_info(sock: str) -> dict[str, Any]:
    status, body = _docker_api(sock, "GET", "/info", timeout=10)
    if status != 200:
        raise TestbedError(f"GET /info -> {status}: {body[:300]!r}")
    return dict(json.loads(body))


def _docker_load(sock: str, archive: str) -> None:
    size = os.path.getsize(archive)
    with open(archive, "rb") as f:
        status, body = _docker_api(
            sock,
            "POST",
            "/images/load?quiet=1",
            body=f,
            headers={"Content-Type": "application/x-tar", "Content-Length": str(size)},
            timeout=T_LOAD,
        )
    if status != 200:
        raise TestbedError(f"POST /images/load -> {status}: {body[:500]!r}")
    for line in body.splitlines():
        with contextlib.suppress(ValueError):
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("error"):
                raise TestbedError(f"docker load: {msg['error']}")


def _docker_cli(
    paths: _Paths, node: Node, *args: str, timeout: float = T_RUN, check: bool = True, what: str = "docker"
) -> subprocess.CompletedProcess[bytes]:
    docker = shutil.which("docker", path=DAEMON_PATH)
    if not docker:
        raise TestbedError("docker CLI not found")
    env = _env()
    env["DOCKER_CONFIG"] = str(paths.docker_cli)
    return _run(
        [docker, "-H", f"unix://{node.docker_socket}", *args],
        what=what,
        timeout=timeout,
        check=check,
        env=env,
    )


# ----------------------------------------------------------------------------- host checks


def check_host() -> list[str]:
    """Reasons this machine cannot run the testbed (empty list: it can)."""
    problems = []
    if sys.platform != "linux":
        return [f"not Linux ({sys.platform})"]
    if os.geteuid() != 0:
        problems.append("not root (the testbed needs root for netns, mounts and dockerd)")
    tools = [
        "ip",
        "nsenter",
        "unshare",
        "mount",
        "umount",
        "ssh-keygen",
        "dockerd",
        "containerd",
        "runc",
        "docker",
    ]
    for tool in tools:
        if not shutil.which(tool, path=DAEMON_PATH):
            problems.append(f"`{tool}` not installed")
    if not os.access(SSHD, os.X_OK):
        problems.append(f"{SSHD} not installed (openssh-server)")
    if not (Path("/bin/busybox").exists() or Path("/usr/bin/busybox").exists()):
        problems.append("busybox not installed (busybox-static)")
    if not Path(_debian_python()[0]).exists():
        problems.append("Debian python3 (/usr/bin/python3.X) not installed")
    if not problems and shutil.which("ip", path=DAEMON_PATH):
        cp = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10, env=_env())
        if cp.returncode != 0:
            problems.append("`ip netns` does not work: " + cp.stderr.decode(errors="replace"))
    return problems


# ----------------------------------------------------------------------------- image


def _debian_python() -> tuple[str, str]:
    """(interpreter path, stdlib dir) of the distribution's CPython."""
    for ver in ("3.11", "3.12", "3.13", "3.10"):
        exe = f"/usr/bin/python{ver}"
        if os.path.exists(exe) and os.path.isdir(f"/usr/lib/python{ver}"):
            return exe, f"/usr/lib/python{ver}"
    return "/usr/bin/python3.11", "/usr/lib/python3.11"


def _busybox() -> str:
    for p in ("/bin/busybox", "/usr/bin/busybox"):
        if os.path.exists(p):
            return p
    raise TestbedError("image: busybox not found (apt-get install busybox-static)")


_STDLIB_SKIP_DIRS = {
    "test",
    "tests",
    "idle_test",
    "idlelib",
    "tkinter",
    "ensurepip",
    "turtledemo",
    "__pycache__",
    "site-packages",
    "dist-packages",
}
_DYNLOAD_SKIP = re.compile(r"^(_test|_xxtest|xxlimited|_ctypes_test|_xxsubinterpreters)")


@dataclasses.dataclass
class _Entry:
    kind: str  # "dir" | "file" | "symlink" | "data"
    mode: int = 0o755
    src: str = ""  # file: source path (symlinks resolved)
    target: str = ""  # symlink target
    data: bytes = b""
    hash_content: bool = False


def _ldd(paths: Sequence[str]) -> set[str]:
    libs: set[str] = set()
    for i in range(0, len(paths), 50):
        chunk = list(paths[i : i + 50])
        cp = _run(["ldd", *chunk], what="image: ldd", check=False)
        for line in cp.stdout.decode(errors="replace").splitlines():
            line = line.strip()
            if "=>" in line:
                rhs = line.split("=>", 1)[1].strip()
                p = rhs.split(" (", 1)[0].strip()
                if p.startswith("/"):
                    libs.add(p)
            elif line.startswith("/") and " (" in line:
                libs.add(line.split(" (", 1)[0].strip())
    return libs


def _image_entries() -> dict[str, _Entry]:
    """Everything that goes into the image, arcname (no leading /) -> entry."""
    ents: dict[str, _Entry] = {}

    def add_file(arc: str, src: str, mode: int | None = None, content: bool = False) -> None:
        real = os.path.realpath(src)
        m = mode if mode is not None else (os.stat(real).st_mode & 0o7777)
        ents[arc.lstrip("/")] = _Entry("file", m, src=real, hash_content=content)

    for d, mode in [
        ("bin", 0o755),
        ("sbin", 0o755),
        ("usr/bin", 0o755),
        ("usr/sbin", 0o755),
        ("usr/lib", 0o755),
        ("usr/local/bin", 0o755),
        ("etc", 0o755),
        ("dev", 0o755),
        ("proc", 0o555),
        ("sys", 0o555),
        ("run", 0o755),
        ("tmp", 0o1777),
        ("var/tmp", 0o1777),
        ("root", 0o700),
        ("home", 0o755),
        ("opt", 0o755),
        ("lib", 0o755),
        ("lib64", 0o755),
    ]:
        ents[d] = _Entry("dir", mode)

    # busybox + applets
    add_file("bin/busybox", _busybox(), 0o755)
    cp = _run([_busybox(), "--list-full"], what="image: busybox --list-full")
    for applet in cp.stdout.decode().split():
        applet = applet.strip().lstrip("/")
        if applet and applet != "bin/busybox":
            ents[applet] = _Entry("symlink", 0o777, target="/bin/busybox")

    # CPython
    py, stdlib = _debian_python()
    pyname = os.path.basename(py)
    add_file(f"usr/bin/{pyname}", py, 0o755)
    ents["usr/bin/python3"] = _Entry("symlink", 0o777, target=pyname)
    ents["usr/bin/python"] = _Entry("symlink", 0o777, target=pyname)
    dynload: list[str] = []
    for dirpath, dirnames, filenames in os.walk(stdlib):
        rel = os.path.relpath(dirpath, stdlib)
        dirnames[:] = sorted(
            d for d in dirnames if d not in _STDLIB_SKIP_DIRS and not (rel == "." and d.startswith("config-"))
        )
        arcdir = os.path.normpath(os.path.join(stdlib.lstrip("/"), rel))
        ents[arcdir] = _Entry("dir", 0o755)
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            src = os.path.join(dirpath, fn)
            if rel == "lib-dynload" and _DYNLOAD_SKIP.match(fn):
                continue
            if not os.path.isfile(src):
                continue
            if rel == "lib-dynload":
                dynload.append(src)
            add_file(f"{arcdir}/{fn}", src)
    for lib in sorted(_ldd([py, *dynload])):
        add_file(lib, lib)
    for extra in ("libgcc_s.so.1",):  # dlopen()ed by glibc for thread cancellation
        if not any(a.endswith("/" + extra) for a in ents):
            for d in (os.path.dirname(p) for p in sorted(_ldd([py]))):
                if os.path.exists(os.path.join(d, extra)):
                    add_file(os.path.join(d, extra), os.path.join(d, extra))
                    break

    # minimal /etc
    ents["etc/passwd"] = _Entry(
        "data",
        0o644,
        data=(b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"),
    )
    ents["etc/group"] = _Entry("data", 0o644, data=b"root:x:0:\nnogroup:x:65534:\n")
    ents["etc/nsswitch.conf"] = _Entry("data", 0o644, data=b"passwd: files\ngroup: files\nhosts: files dns\n")

    # the demo engine, if it exists yet
    if DEMO_SRC.is_dir():
        ents["opt/sparktui"] = _Entry("dir", 0o755)
        ents["opt/sparktui/sparktui"] = _Entry("dir", 0o755)
        ents["opt/sparktui/sparktui/__init__.py"] = _Entry("data", 0o644, data=b"")
        for dirpath, dirnames, filenames in os.walk(DEMO_SRC):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = os.path.relpath(dirpath, DEMO_SRC)
            arcdir = os.path.normpath(os.path.join("opt/sparktui/sparktui/demo", rel))
            ents[arcdir] = _Entry("dir", 0o755)
            for fn in sorted(filenames):
                src = os.path.join(dirpath, fn)
                if fn.endswith((".pyc", ".pyo")) or not os.path.isfile(src):
                    continue
                add_file(f"{arcdir}/{fn}", src, 0o644, content=True)

    # parents of everything
    for arc in list(ents):
        parent = os.path.dirname(arc)
        while parent and parent not in ents:
            ents[parent] = _Entry("dir", 0o755)
            parent = os.path.dirname(parent)
    return ents


def _inputs_hash(ents: dict[str, _Entry]) -> str:
    h = hashlib.sha256()
    h.update(f"recipe={IMAGE_RECIPE_VERSION};env={IMAGE_ENV};arch={_arch()}\n".encode())
    for arc in sorted(ents):
        e = ents[arc]
        h.update(f"{arc}\0{e.kind}\0{e.mode:o}\0{e.target}\0".encode())
        if e.kind == "data":
            h.update(hashlib.sha256(e.data).digest())
        elif e.kind == "file":
            if e.hash_content:
                h.update(hashlib.sha256(Path(e.src).read_bytes()).digest())
            else:
                st = os.stat(e.src)
                h.update(f"{e.src}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}".encode())
        h.update(b"\n")
    return h.hexdigest()


def _arch() -> str:
    m = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(m, m)


def _write_layer(ents: dict[str, _Entry], f: io.BufferedWriter) -> None:
    with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for arc in sorted(ents):
            e = ents[arc]
            ti = tarfile.TarInfo(arc)
            ti.mtime = IMAGE_MTIME
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            ti.mode = e.mode
            if e.kind == "dir":
                ti.type = tarfile.DIRTYPE
                tar.addfile(ti)
            elif e.kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = e.target
                tar.addfile(ti)
            elif e.kind == "data":
                ti.size = len(e.data)
                tar.addfile(ti, io.BytesIO(e.data))
            else:
                with open(e.src, "rb") as src:
                    ti.size = os.fstat(src.fileno()).st_size
                    tar.addfile(ti, src)


def _sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_image(paths: _Paths) -> tuple[str, str, str]:
    """Build (or reuse from the cache) a `docker load` archive of sparktui-demo:latest.

    The archive is made here, not by `docker import`: its config has a fixed creation time,
    so the image id is a pure function of the inputs and identical on every engine.
    Returns (archive path, image id, inputs hash)."""
    ents = _image_entries()
    inputs = _inputs_hash(ents)
    paths.cache.mkdir(parents=True, exist_ok=True)
    archive = paths.cache / f"sparktui-demo-{inputs[:16]}.tar"
    meta = paths.cache / f"sparktui-demo-{inputs[:16]}.json"
    if archive.exists() and meta.exists():
        with contextlib.suppress(ValueError, OSError, KeyError):
            image_id = json.loads(meta.read_text())["image_id"]
            _log(f"image: cached {archive.name} ({image_id[:19]})")
            return str(archive), image_id, inputs
    _log(f"image: building {archive.name} ({len(ents)} entries)")
    with tempfile.TemporaryDirectory(dir=paths.cache) as tmp:
        layer = Path(tmp) / "layer.tar"
        with open(layer, "wb") as f:
            _write_layer(ents, f)
        diff_id = _sha256_file(layer)
        config = {
            "architecture": _arch(),
            "os": "linux",
            "created": IMAGE_CREATED,
            "config": {
                "Env": IMAGE_ENV,
                "Cmd": ["/bin/sh"],
                "WorkingDir": "/",
                "Labels": {"org.sparktui.testbed.inputs": inputs},
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
            "history": [
                {
                    "created": IMAGE_CREATED,
                    "created_by": "scripts/testbed.py: busybox-static + Debian CPython",
                }
            ],
        }
        config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
        config_hex = hashlib.sha256(config_bytes).hexdigest()
        manifest = [{"Config": f"{config_hex}.json", "RepoTags": [IMAGE], "Layers": [f"{diff_id}/layer.tar"]}]
        repo, tag = IMAGE.rsplit(":", 1)
        tmp_archive = Path(tmp) / "image.tar"
        with tarfile.open(tmp_archive, "w", format=tarfile.PAX_FORMAT) as tar:

            def add_bytes(name: str, data: bytes) -> None:
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime, ti.mode = len(data), IMAGE_MTIME, 0o644
                tar.addfile(ti, io.BytesIO(data))

            dti = tarfile.TarInfo(diff_id)
            dti.type, dti.mtime, dti.mode = tarfile.DIRTYPE, IMAGE_MTIME, 0o755
            tar.addfile(dti)
            add_bytes(f"{diff_id}/VERSION", b"1.0")
            lti = tar.gettarinfo(str(layer), arcname=f"{diff_id}/layer.tar")
            lti.mtime, lti.uid, lti.gid, lti.uname, lti.gname = IMAGE_MTIME, 0, 0, "", ""
            with open(layer, "rb") as lf:
                tar.addfile(lti, lf)
            add_bytes(f"{config_hex}.json", config_bytes)
            add_bytes("manifest.json", json.dumps(manifest).encode())
            add_bytes("repositories", json.dumps({repo: {tag: diff_id}}).encode())
        for old in paths.cache.glob("sparktui-demo-*"):
            with contextlib.suppress(OSError):
                old.unlink()
        os.replace(tmp_archive, archive)
    image_id = f"sha256:{config_hex}"
    meta.write_text(json.dumps({"image_id": image_id, "inputs": inputs, "entries": len(ents)}))
    _log(f"image: built {archive.name} {archive.stat().st_size >> 20} MiB id {image_id[:19]}")
    return str(archive), image_id, inputs


# ----------------------------------------------------------------------------- pieces


def _sshd_config(node: Node, paths: _Paths, host_key: str) -> str:
    return "\n".join(
        [
            "# generated by scripts/testbed.py",
            f"ListenAddress {node.ip}:{node.ssh_port}",
            f"HostKey {host_key}",
            f"PidFile {node.ssh_pidfile}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            f"AuthorizedKeysFile {paths.authorized_keys}",
            "StrictModes no",
            "UsePAM no",
            "UseDNS no",
            "AllowTcpForwarding yes",
            "AllowStreamLocalForwarding yes",
            "StreamLocalBindUnlink yes",
            "X11Forwarding no",
            "PrintMotd no",
            "PrintLastLog no",
            "MaxStartups 200",
            "MaxSessions 200",
            "LogLevel INFO",
            "Subsystem sftp internal-sftp",
            "",
        ]
    )


def _keygen(path: str | Path, comment: str) -> str:
    p = Path(path)
    for q in (p, Path(str(p) + ".pub")):
        with contextlib.suppress(FileNotFoundError):
            q.unlink()
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(p)], what="ssh-keygen")
    return Path(str(p) + ".pub").read_text().strip()


def _pubkey_line(path: str | Path) -> str:
    parts = Path(str(path) + ".pub").read_text().split()
    return f"{parts[0]} {parts[1]}"


def _write_known_hosts(paths: _Paths, nodes: Sequence[Node]) -> None:
    lines = []
    for node in nodes:
        key_path = _active_host_key(node)
        lines.append(f"{node.ip} {_pubkey_line(key_path)}")
    paths.known_hosts.write_text("\n".join(lines) + "\n")


def _active_host_key(node: Node) -> str:
    try:
        for line in Path(node.sshd_config).read_text().splitlines():
            if line.startswith("HostKey "):
                return line.split(None, 1)[1].strip()
    except OSError:
        pass
    return node.host_key


def _toml_str(s: str) -> str:
    return json.dumps(s)


def _write_cluster_file(paths: _Paths, nodes: Sequence[Node]) -> None:
    out = [
        "# sparktui cluster file for the local testbed (generated by scripts/testbed.py)",
        'name = "testbed"',
        'hf_cache = "/home/hf"',
        "dist_init_port = 25000",
        "",
        "[ssh]",
        'user = "root"',
        f"identity = {_toml_str(str(paths.identity))}",
        f"known_hosts = {_toml_str(str(paths.known_hosts))}",
        "",
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
    paths.cluster_file.write_text("\n".join(out) + "\n")


def _setup_bridge() -> None:
    with _step(None, f"create bridge {BRIDGE}"):
        if not Path(f"/sys/class/net/{BRIDGE}").exists():
            cp = _run(
                ["ip", "-4", "route", "show", f"{SUBNET_PREFIX}0/{PREFIX_LEN}"], what="ip route", check=False
            )
            if cp.stdout.strip():
                raise TestbedError(
                    f"{SUBNET_PREFIX}0/{PREFIX_LEN} is already routed here: {cp.stdout.decode().strip()}"
                )
            _run(["ip", "link", "add", BRIDGE, "type", "bridge"], what="ip link add")
        _write_sysctl(f"net/ipv6/conf/{BRIDGE}/disable_ipv6", "1")
        cp = _run(["ip", "-4", "addr", "show", "dev", BRIDGE], what="ip addr")
        if f"{BRIDGE_IP}/{PREFIX_LEN}" not in cp.stdout.decode():
            _run(["ip", "addr", "add", f"{BRIDGE_IP}/{PREFIX_LEN}", "dev", BRIDGE], what="ip addr add")
        _run(["ip", "link", "set", BRIDGE, "up"], what="ip link set up")
        _allow_bridged_forwarding()


_FORWARD_RULE = [
    "FORWARD",
    "-i",
    BRIDGE,
    "-o",
    BRIDGE,
    "-j",
    "ACCEPT",
    "-m",
    "comment",
    "--comment",
    "sparktui-testbed",
]


def _allow_bridged_forwarding() -> None:
    """With br_netfilter loaded, node-to-node frames cross iptables' FORWARD chain, whose
    policy is DROP on machines running Docker: accept our bridge's own traffic there."""
    try:
        on = Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"
    except OSError:
        on = False
    ipt = shutil.which("iptables", path=DAEMON_PATH)
    if not on or not ipt:
        return
    if _run([ipt, "-w", "5", "-C", *_FORWARD_RULE], what="iptables", check=False).returncode:
        _run([ipt, "-w", "5", "-I", *_FORWARD_RULE], what="iptables -I FORWARD", check=False)


def _remove_forward_rule() -> None:
    ipt = shutil.which("iptables", path=DAEMON_PATH)
    for _ in range(10):
        if not ipt or _run([ipt, "-w", "5", "-D", *_FORWARD_RULE], what="iptables", check=False).returncode:
            break


def _write_sysctl(key: str, value: str) -> None:
    with contextlib.suppress(OSError):
        Path("/proc/sys", key).write_text(value)


def _setup_netns(node: Node) -> None:
    veth = f"sptb-v{node.index}"
    with _step(node.name, "network namespace"):
        _run(["ip", "netns", "add", node.netns], what="ip netns add")
        _run(
            ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", node.netns],
            what="ip link add veth",
        )
        _write_sysctl(f"net/ipv6/conf/{veth}/disable_ipv6", "1")
        batch = (
            "\n".join(
                [
                    "link set lo up",
                    f"addr add {node.ip}/{PREFIX_LEN} dev eth0",
                    "link set eth0 up",
                ]
            )
            + "\n"
        )
        _run(["ip", "-n", node.netns, "-batch", "-"], what="ip -n batch", input=batch.encode())
        _run(["ip", "link", "set", veth, "master", BRIDGE, "up"], what="ip link set master")
        # as on a real host (also silences docker's "IPv4 forwarding is disabled" warning)
        _run(
            [
                "nsenter",
                f"--net={node.netns_path}",
                "sh",
                "-c",
                "echo 1 > /proc/sys/net/ipv4/ip_forward; echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6",
            ],
            what="netns sysctls",
        )


def _setup_mntns(node: Node, paths: _Paths) -> None:
    """Persistent private mount namespace with the node's own /home and /run."""
    sd = str(paths.sd)
    with _step(node.name, "mount namespace"):
        Path(node.mntns).touch()
        _run(["unshare", f"--mount={node.mntns}", "--propagation", "private", "true"], what="unshare --mount")
        # In the copy of the mount table, drop other namespaces' handles (netns, other
        # nodes' mount ns) so this namespace keeps none of them alive.
        nsfs = [mp for mp, fs in _mounts() if fs == "nsfs"]
        lines = ["set -e"]
        lines += [f"umount -l {shlex.quote(mp)} 2>/dev/null || true" for mp in nsfs]
        overmounts = [(node.home, "/home"), (node.run_dir, "/run")]
        for src, target in overmounts:
            if _under(sd, target):  # keep the state dir visible under the overmount
                keep = os.path.join(src, os.path.relpath(sd, target))
                Path(keep).mkdir(parents=True, exist_ok=True)
                lines.append(f"mount --bind {shlex.quote(sd)} {shlex.quote(keep)}")
        for src, target in overmounts:
            lines.append(f"mount --rbind {shlex.quote(src)} {shlex.quote(target)}")
        _run(["nsenter", f"--mount={node.mntns}", "sh", "-c", "\n".join(lines)], what="mounts in the node")


def _ns_dir_private(paths: _Paths) -> None:
    """unshare --mount=FILE needs FILE on a mount that is not shared."""
    paths.ns_dir.mkdir(parents=True, exist_ok=True)
    if not _is_mountpoint(paths.ns_dir):
        _run(["mount", "--bind", str(paths.ns_dir), str(paths.ns_dir)], what="bind ns dir")
    _run(["mount", "--make-private", str(paths.ns_dir)], what="make ns dir private")


def _start_sshd(node: Node) -> int:
    with _step(node.name, "start sshd"):
        pid = _daemon_pid(node.ssh_pidfile, node.sshd_config)
        if pid and _tcp_open(node.ip, node.ssh_port):
            return pid
        if pid:
            _terminate([pid], 3.0)
        Path(node.run_dir, "sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(node.ssh_pidfile)
        _run(["nsenter", f"--mount={node.mntns}", "--", SSHD, "-t", "-f", node.sshd_config], what="sshd -t")
        pid = _spawn_in_node(node, [SSHD, "-D", "-f", node.sshd_config, "-E", node.sshd_log], node.sshd_log)
        deadline = time.monotonic() + T_SSHD
        while time.monotonic() < deadline:
            if not _alive(pid):
                raise TestbedError(f"sshd exited; log {node.sshd_log}:\n{_tail(node.sshd_log)}")
            if _read_pid(node.ssh_pidfile) == pid and _tcp_open(node.ip, node.ssh_port):
                return pid
            time.sleep(0.05)
        raise TestbedError(
            f"sshd not listening on {node.ip}:{node.ssh_port} after "
            f"{T_SSHD:.0f}s; log:\n{_tail(node.sshd_log)}"
        )


def _tcp_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _sshd_pids(node: Node) -> list[int]:
    """The listener and every per-connection sshd of the node."""
    net = _ns_file_inode(node.netns_path)
    pids = []
    listener = _daemon_pid(node.ssh_pidfile, node.sshd_config)
    if listener:
        pids.append(listener)
    if net is not None:
        for pid in _all_pids():
            if pid in pids or _ns_inode(pid, "net") != net:
                continue
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            if exe == SSHD:
                pids.append(pid)
    return pids


def _stop_sshd(node: Node) -> None:
    with _step(node.name, "stop sshd"):
        left = _terminate(_sshd_pids(node), 3.0)
        if left:
            raise TestbedError(f"sshd processes {left} survived SIGKILL")
        deadline = time.monotonic() + 5
        while _tcp_open(node.ip, node.ssh_port, 0.5) and time.monotonic() < deadline:
            time.sleep(0.05)


def _start_dockerd(node: Node, paths: _Paths, driver: str) -> int:
    with _step(node.name, f"start dockerd ({driver})"):
        for d in (node.docker_data_root, node.docker_exec_root, node.run_dir):
            Path(d).mkdir(parents=True, exist_ok=True)
        daemon_json = Path(node.dir) / "daemon.json"
        # own engine key (else every dockerd shares /etc/docker/key.json and its engine ID)
        daemon_json.write_text(
            json.dumps({"deprecated-key-path": os.path.join(node.dir, "docker-key.json")}) + "\n"
        )
        with contextlib.suppress(FileNotFoundError):
            os.unlink(node.docker_pidfile)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(node.docker_socket)
        argv = [
            "dockerd",
            f"--config-file={daemon_json}",
            f"--data-root={node.docker_data_root}",
            f"--exec-root={node.docker_exec_root}",
            f"--pidfile={node.docker_pidfile}",
            f"--host=unix://{node.docker_socket_in_node}",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            "--ip-masq=false",
            "--ip-forward=false",
            "--userland-proxy=false",
            f"--storage-driver={driver}",
            "--exec-opt=native.cgroupdriver=cgroupfs",
            f"--cgroup-parent=/{node.netns}",
            "--shutdown-timeout=3",
            "--log-level=warn",
        ]
        with open(node.docker_log, "ab") as f:
            f.write(f"\n=== {time.ctime()} {shlex.join(argv)}\n".encode())
        pid = _spawn_in_node(node, argv, node.docker_log)
        deadline = time.monotonic() + T_DOCKERD
        while time.monotonic() < deadline:
            if not _alive(pid):
                raise TestbedError(f"dockerd exited; log {node.docker_log}:\n{_tail(node.docker_log)}")
            if os.path.exists(node.docker_socket) and _docker_ping(node.docker_socket):
                return pid
            time.sleep(0.1)
        _terminate([pid], 5)
        raise TestbedError(
            f"dockerd did not answer on {node.docker_socket} within "
            f"{T_DOCKERD:.0f}s; log:\n{_tail(node.docker_log)}"
        )


def _remove_containers(node: Node) -> None:
    """Force-remove the node's running containers (best effort; dockerd is stopped next)."""
    try:
        status, body = _docker_api(node.docker_socket, "GET", "/containers/json", timeout=5)
        ids = [c["Id"] for c in json.loads(body)] if status == 200 else []
    except (OSError, ValueError, KeyError, TypeError):
        return

    def rm(cid: str) -> None:
        with contextlib.suppress(OSError):
            _docker_api(node.docker_socket, "DELETE", f"/containers/{cid}?force=1", timeout=10)

    if ids:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(ids))) as ex:
            list(ex.map(rm, ids))


def _stop_node(node: Node) -> list[str]:
    """Stop everything in a node and free its namespaces. Returns problems (best effort)."""
    problems = []
    t0 = time.monotonic()
    dockerd = _daemon_pid(node.docker_pidfile, node.docker_data_root)
    if dockerd:
        _remove_containers(node)  # else dockerd waits up to 10 s for each on shutdown
        left = _terminate([dockerd], T_STOP)
        if left:
            problems.append(f"{node.name}: dockerd {dockerd} survived SIGKILL")
        _log(f"down: {node.name}: dockerd stopped in {time.monotonic() - t0:.1f}s")
    _terminate(_sshd_pids(node), 3.0)
    # everything else that lives in the node (containerd, shims, containers, ssh sessions)
    for _ in range(3):
        pids = _node_pids(node)
        if not pids:
            break
        for p in pids:
            _kill(p, signal.SIGKILL)
        left = _wait_gone(pids, 10.0)
        if left:
            problems.append(f"{node.name}: processes {left} survived SIGKILL")
    if _ns_file_inode(node.mntns) is not None or _is_mountpoint(node.mntns):
        cp = _run(["umount", node.mntns], what="umount", check=False)
        if cp.returncode != 0:
            _run(["umount", "-l", node.mntns], what="umount", check=False)
    if Path(node.netns_path).exists():
        cp = _run(["ip", "netns", "del", node.netns], what="ip netns del", check=False)
        if cp.returncode != 0:
            problems.append(f"{node.name}: ip netns del: {cp.stderr.decode().strip()}")
    veth = f"sptb-v{node.index}"
    if Path(f"/sys/class/net/{veth}").exists():
        _run(["ip", "link", "del", veth], what="ip link del", check=False)
    _rm_cgroups(node.netns)
    return problems


# ----------------------------------------------------------------------------- public API


def load(state_dir: str | os.PathLike[str] | None = None) -> Testbed | None:
    """The testbed described by <state>/testbed.json, or None."""
    paths = _Paths(state_dir)
    try:
        return Testbed.from_json(json.loads(paths.info.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _health(tb: Testbed) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for node in tb.nodes:
        dockerd = _daemon_pid(node.docker_pidfile, node.docker_data_root)
        sshd = _daemon_pid(node.ssh_pidfile, node.sshd_config)
        ping = bool(dockerd) and _docker_ping(node.docker_socket)
        out[node.name] = {
            "netns": _ns_file_inode(node.netns_path) is not None,
            "mntns": _ns_file_inode(node.mntns) is not None,
            "sshd_pid": sshd,
            "ssh_port_open": bool(sshd) and _tcp_open(node.ip, node.ssh_port),
            "dockerd_pid": dockerd,
            "docker_ping": ping,
            "image_id": _docker_image_id(node.docker_socket) if ping else None,
        }
    return out


def status(state_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Machine-readable health of the testbed."""
    paths = _Paths(state_dir)
    tb = load(paths.sd)
    if tb is None:
        leftovers = _leftovers()
        return {"state_dir": str(paths.sd), "up": False, "leftovers": leftovers}
    health = _health(tb)
    ok = Path(f"/sys/class/net/{BRIDGE}").exists() and all(
        h["netns"] and h["mntns"] and h["ssh_port_open"] and h["docker_ping"] and h["image_id"] == tb.image_id
        for h in health.values()
    )
    return {"state_dir": str(paths.sd), "up": ok, "testbed": tb.to_json(), "health": health}


def _leftovers() -> list[str]:
    found = []
    cp = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10, env=_env())
    for line in cp.stdout.decode().splitlines():
        name = line.split()[0] if line.split() else ""
        if NETNS_RE.match(name):
            found.append(f"netns {name}")
    for dev in sorted(os.listdir("/sys/class/net")):
        if dev == BRIDGE or VETH_RE.match(dev):
            found.append(f"link {dev}")
    return found


def up(
    n: int = 4,
    state_dir: str | os.PathLike[str] | None = None,
    *,
    verify: bool = True,
    verbose: bool | None = None,
) -> Testbed:
    """Bring the testbed up (or reuse it when it is already up with n nodes)."""
    global _verbose
    if verbose is not None:
        _verbose = verbose
    if not 1 <= n <= MAX_NODES:
        raise TestbedError(f"--nodes must be 1..{MAX_NODES}")
    problems = check_host()
    if problems:
        raise TestbedError("this machine cannot run the testbed: " + "; ".join(problems))
    paths = _Paths(state_dir)
    with _locked(paths):
        t0 = time.monotonic()
        tb = load(paths.sd)
        if tb is not None and len(tb.nodes) == n:
            reused = _try_reuse(tb, paths)
            if reused is not None:
                reused.timings["up_warm_s"] = round(time.monotonic() - t0, 2)
                _log(f"testbed already up ({n} nodes), reused in {reused.timings['up_warm_s']}s")
                return reused
            _log("testbed is not healthy; rebuilding it")
        elif tb is not None:
            _log(f"testbed has {len(tb.nodes)} nodes, {n} wanted; rebuilding it")
        problems = _down_locked(paths, purge=False)
        if problems:
            raise TestbedError("cleanup before up failed:\n  " + "\n  ".join(problems))
        tb = _up_cold(n, paths, verify=verify)
        tb.timings["up_cold_s"] = round(time.monotonic() - t0, 2)
        paths.info.write_text(json.dumps(tb.to_json(), indent=2) + "\n")
        _log(f"testbed up: {n} nodes in {tb.timings['up_cold_s']}s")
        return tb


def _try_reuse(tb: Testbed, paths: _Paths) -> Testbed | None:
    if not Path(f"/sys/class/net/{BRIDGE}").exists():
        return None
    health = _health(tb)
    for node in tb.nodes:
        h = health[node.name]
        if not (h["netns"] and h["mntns"] and h["docker_ping"]):
            return None
    # sshd may have been stopped by a test: restart it
    dead_sshd = [node for node in tb.nodes if not health[node.name]["ssh_port_open"]]
    if dead_sshd:
        _log("restarting sshd on " + ", ".join(n.name for n in dead_sshd))
        _parallel(dead_sshd, _start_sshd)
    archive, image_id, inputs = build_image(paths)
    stale = [node for node in tb.nodes if health[node.name]["image_id"] != image_id]
    if stale:
        _log(f"loading image {image_id[:19]} into " + ", ".join(n.name for n in stale))

        def reload(node: Node) -> None:
            _load_image(node, archive, image_id)
            old = health[node.name]["image_id"]
            if old and old != image_id:  # drop the superseded image unless a container uses it
                with contextlib.suppress(OSError):
                    _docker_api(node.docker_socket, "DELETE", f"/images/{old}", timeout=30)

        _parallel(stale, reload)
    if stale or image_id != tb.image_id:
        tb.image_id, tb.image_inputs, tb.image_archive = image_id, inputs, archive
        paths.info.write_text(json.dumps(tb.to_json(), indent=2) + "\n")
    tb.reused = True
    return tb


def _load_image(node: Node, archive: str, image_id: str) -> None:
    with _step(node.name, "load image"):
        _docker_load(node.docker_socket, archive)
        got = _docker_image_id(node.docker_socket)
        if got != image_id:
            raise TestbedError(f"{IMAGE} has id {got}, expected {image_id}")


def _up_cold(n: int, paths: _Paths, *, verify: bool) -> Testbed:
    timings: dict[str, float] = {}
    t = time.monotonic()

    def lap(name: str) -> None:
        nonlocal t
        now = time.monotonic()
        timings[name] = round(now - t, 2)
        t = now

    nodes = [paths.node(i) for i in range(n)]
    with _step(None, "state dir"):
        paths.sd.mkdir(parents=True, exist_ok=True)
        os.chmod(paths.sd, 0o755)
        for node in nodes:
            for d in (node.dir, node.home, node.run_dir, os.path.join(node.home, "hf")):
                Path(d).mkdir(parents=True, exist_ok=True)
        paths.docker_cli.mkdir(exist_ok=True)

    # the image build does not depend on the nodes: overlap it with the node setup
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        image_future = ex.submit(build_image, paths)

        with _step(None, "keys"):
            _keygen(paths.identity, "sparktui-testbed-client")
            paths.authorized_keys.write_text(_pubkey_line(paths.identity) + "\n")
            for node in nodes:
                _keygen(node.host_key, f"sparktui-testbed-{node.name}")
                Path(node.sshd_config).write_text(_sshd_config(node, paths, node.host_key))
            _write_known_hosts(paths, nodes)
        lap("keys_s")

        _setup_bridge()
        for node in nodes:
            _setup_netns(node)
        lap("network_s")
        with _step(None, "mount namespaces"):
            _ns_dir_private(paths)
        for node in nodes:
            _setup_mntns(node, paths)
        lap("mount_ns_s")

        _parallel(nodes, _start_sshd)
        lap("sshd_s")

        driver = os.environ.get(STORAGE_DRIVER_ENV) or "overlay2"

        def start_engine(node: Node) -> None:
            try:
                _start_dockerd(node, paths, driver)
                node.storage_driver = driver
            except TestbedError as e:
                if driver != "overlay2" or os.environ.get(STORAGE_DRIVER_ENV):
                    raise
                _log(f"{node.name}: overlay2 failed, falling back to vfs ({e})")
                _start_dockerd(node, paths, "vfs")
                node.storage_driver = "vfs"
            info = _docker_info(node.docker_socket)
            if info.get("Driver") != node.storage_driver:
                raise TestbedError(
                    f"{node.name}: dockerd uses storage driver "
                    f"{info.get('Driver')!r}, asked for {node.storage_driver}"
                )

        _parallel(nodes, start_engine)
        lap("dockerd_s")

        with _step(None, "build image"):
            archive, image_id, inputs = image_future.result(timeout=T_LOAD)
        lap("image_build_wait_s")
    _parallel(nodes, lambda node: _load_image(node, archive, image_id))
    lap("image_load_s")

    drivers = sorted({node.storage_driver for node in nodes})
    tb = Testbed(
        state_dir=str(paths.sd),
        nodes=nodes,
        bridge=BRIDGE,
        bridge_ip=BRIDGE_IP,
        identity=str(paths.identity),
        identity_pub=str(paths.identity_pub),
        authorized_keys=str(paths.authorized_keys),
        known_hosts=str(paths.known_hosts),
        cluster_file=str(paths.cluster_file),
        info_file=str(paths.info),
        image=IMAGE,
        image_id=image_id,
        image_inputs=inputs,
        image_archive=archive,
        storage_driver=",".join(drivers),
        created=time.time(),
        timings=timings,
    )
    _write_cluster_file(paths, nodes)
    paths.info.write_text(json.dumps(tb.to_json(), indent=2) + "\n")
    if verify:
        _verify(tb, paths)
        lap("verify_s")
    return tb


def _verify(tb: Testbed, paths: _Paths) -> None:
    """Check every node from the root namespace: ssh with strict host keys, own /home and
    docker socket, a container run, and container-to-container TCP between nodes."""
    ssh = shutil.which("ssh", path=DAEMON_PATH)

    def check_node(node: Node) -> None:
        if ssh:
            with _step(node.name, "verify ssh"):
                cp = _run(
                    [
                        ssh,
                        "-F",
                        "/dev/null",
                        "-i",
                        tb.identity,
                        "-o",
                        "IdentitiesOnly=yes",
                        "-o",
                        "BatchMode=yes",
                        "-o",
                        f"UserKnownHostsFile={tb.known_hosts}",
                        "-o",
                        "GlobalKnownHostsFile=/dev/null",
                        "-o",
                        "StrictHostKeyChecking=yes",
                        "-o",
                        "ConnectTimeout=5",
                        f"root@{node.ip}",
                        "stat -c %i /home /var/run/docker.sock",
                    ],
                    what="ssh",
                    timeout=20,
                )
                got = cp.stdout.decode().split()
                want = [str(os.stat(node.home).st_ino), str(os.stat(node.docker_socket).st_ino)]
                if got != want:
                    raise TestbedError(
                        f"node sees /home and docker.sock as inodes {got}, "
                        f"expected {want} (private mounts not in place)"
                    )
        with _step(node.name, "verify docker run"):
            cp = _docker_cli(
                paths,
                node,
                "run",
                "--rm",
                "--network",
                "host",
                IMAGE,
                "python3",
                "-c",
                "import json, asyncio, http.server, hashlib, ssl; print(1)",
                what="docker run",
            )
            if cp.stdout.decode().strip() != "1":
                raise TestbedError(f"unexpected output {cp.stdout!r} {cp.stderr!r}")

    _parallel(tb.nodes, check_node)
    if len(tb.nodes) >= 2:
        _verify_cross_node(tb, paths, tb.nodes[0], tb.nodes[1])


def _verify_cross_node(tb: Testbed, paths: _Paths, a: Node, b: Node) -> None:
    name = "sptb-verify-listen"
    server = (
        "import socket\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(({a.ip!r}, {VERIFY_PORT}))\n"
        "s.listen(1)\n"
        "s.settimeout(30)\n"
        "c, _ = s.accept()\n"
        "c.sendall(b'pong')\n"
        "c.close()\n"
    )
    client = (
        "import socket, time\n"
        "deadline = time.time() + 20\n"
        "while True:\n"
        "    try:\n"
        f"        c = socket.create_connection(({a.ip!r}, {VERIFY_PORT}), timeout=3)\n"
        "        break\n"
        "    except OSError:\n"
        "        if time.time() > deadline: raise\n"
        "        time.sleep(0.1)\n"
        "print(c.recv(16).decode())\n"
    )
    with _step(f"{a.name}->{b.name}", "verify container TCP between nodes"):
        _docker_cli(paths, a, "rm", "-f", name, check=False, what="docker rm")
        try:
            _docker_cli(
                paths,
                a,
                "run",
                "-d",
                "--rm",
                "--network",
                "host",
                "--name",
                name,
                IMAGE,
                "python3",
                "-c",
                server,
                what="docker run (listener)",
            )
            cp = _docker_cli(
                paths,
                b,
                "run",
                "--rm",
                "--network",
                "host",
                IMAGE,
                "python3",
                "-c",
                client,
                what="docker run (client)",
            )
            if cp.stdout.decode().strip() != "pong":
                raise TestbedError(f"client got {cp.stdout!r} {cp.stderr!r}")
        finally:
            _docker_cli(paths, a, "rm", "-f", name, check=False, what="docker rm")


def down(
    state_dir: str | os.PathLike[str] | None = None, *, purge: bool = False, verbose: bool | None = None
) -> None:
    """Stop and remove everything the testbed made (also after a half-failed up).
    The image cache in <state>/cache is kept unless purge=True."""
    global _verbose
    if verbose is not None:
        _verbose = verbose
    paths = _Paths(state_dir)
    if not paths.sd.exists() and not _leftovers():
        return
    with _locked(paths):
        problems = _down_locked(paths, purge=purge)
    if problems:
        raise TestbedError("down left something behind:\n  " + "\n  ".join(problems))


def _down_locked(paths: _Paths, *, purge: bool) -> list[str]:
    indices: set[int] = set()
    tb = load(paths.sd)
    if tb is not None:
        indices.update(node.index for node in tb.nodes)
    if paths.sd.exists():
        for p in paths.sd.iterdir():
            m = re.fullmatch(r"node(\d+)", p.name)
            if m:
                indices.add(int(m.group(1)))
    if paths.ns_dir.exists():
        for p in paths.ns_dir.iterdir():
            m = re.fullmatch(r"node(\d+)", p.name)
            if m:
                indices.add(int(m.group(1)))
    for item in _leftovers():
        m = re.search(r"sptb-(?:node|v)(\d+)$", item)
        if m:
            indices.add(int(m.group(1)))
    if not indices and not Path(f"/sys/class/net/{BRIDGE}").exists():
        _remove_forward_rule()
        return _cleanup_files(paths, purge)
    _log("down: stopping " + ", ".join(f"node{i}" for i in sorted(indices)))
    nodes = [paths.node(i) for i in sorted(indices)]
    problems: list[str] = []
    if nodes:
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(nodes)) as ex:
            for res in ex.map(_stop_node, nodes):
                problems += res
    _remove_forward_rule()
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        cp = _run(["ip", "link", "del", BRIDGE], what="ip link del", check=False)
        if cp.returncode != 0:
            problems.append(f"ip link del {BRIDGE}: {cp.stderr.decode().strip()}")
    problems += [f"could not unmount {mp}" for mp in _umount_under(paths.sd)]
    problems += _cleanup_files(paths, purge)
    problems += [f"left behind: {x}" for x in _leftovers()]
    _log("down: done" + (f" with {len(problems)} problems" if problems else ""))
    return problems


def _cleanup_files(paths: _Paths, purge: bool) -> list[str]:
    problems: list[str] = []
    if not paths.sd.exists():
        return problems
    if _is_mountpoint(paths.sd) or any(_under(mp, str(paths.sd)) for mp, _ in _mounts()):
        return [f"mounts remain under {paths.sd}; not deleting files"]
    for p in paths.sd.iterdir():
        if p.name == ".lock" or (p.name == "cache" and not purge):
            continue
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        except OSError as e:
            problems.append(f"rm {p}: {e}")
    return problems


def _with_node(state_dir: str | os.PathLike[str] | None, which: str | int) -> tuple[_Paths, Testbed, Node]:
    paths = _Paths(state_dir)
    tb = load(paths.sd)
    if tb is None:
        raise TestbedError(f"no testbed in {paths.sd} (run `testbed.py up` first)")
    return paths, tb, tb.node(which)


def stop_sshd(state_dir: str | os.PathLike[str] | None, node: str | int) -> None:
    """Kill the node's sshd and every SSH connection to it (the port then refuses)."""
    paths, _, nd = _with_node(state_dir, node)
    with _locked(paths):
        _stop_sshd(nd)


def start_sshd(state_dir: str | os.PathLike[str] | None, node: str | int) -> None:
    """Start the node's sshd again (no-op when it is running)."""
    paths, _, nd = _with_node(state_dir, node)
    with _locked(paths):
        _start_sshd(nd)


def rekey(
    state_dir: str | os.PathLike[str] | None,
    node: str | int,
    *,
    restore: bool = False,
    update_known_hosts: bool = False,
) -> str:
    """Give the node's sshd a new host key (known_hosts is NOT updated unless asked), or with
    restore=True put its original key back. Restarts sshd; returns the active public key."""
    paths, tb, nd = _with_node(state_dir, node)
    with _locked(paths), _step(nd.name, "rekey"):
        if restore:
            key = nd.host_key
        else:
            key = nd.host_key + ".rekeyed"
            _keygen(key, f"sparktui-testbed-{nd.name}-rekeyed")
        Path(nd.sshd_config).write_text(_sshd_config(nd, paths, key))
        _stop_sshd(nd)
        _start_sshd(nd)
        if update_known_hosts:
            _write_known_hosts(paths, tb.nodes)
        return _pubkey_line(key)


# ----------------------------------------------------------------------------- CLI


def _print_status(st: dict[str, Any]) -> None:
    print(f"state dir: {st['state_dir']}")
    if "testbed" not in st:
        print(
            "testbed: down" + (f" (leftovers: {', '.join(st['leftovers'])})" if st.get("leftovers") else "")
        )
        return
    tb = st["testbed"]
    print(f"testbed: {'UP' if st['up'] else 'NOT HEALTHY'}   cluster file: {tb['cluster_file']}")
    print(f"image: {tb['image']} {tb['image_id']}   storage driver: {tb['storage_driver']}")
    for node in tb["nodes"]:
        h = st["health"][node["name"]]
        img = "ok" if h["image_id"] == tb["image_id"] else f"WRONG({h['image_id']})"
        print(
            f"  {node['name']:7} {node['ip']:13} sshd={h['sshd_pid'] or 'DOWN'}"
            f"{'' if h['ssh_port_open'] else '(port closed)'}"
            f" dockerd={h['dockerd_pid'] or 'DOWN'}"
            f"{'' if h['docker_ping'] else '(no ping)'} image={img}"
            f" socket={node['docker_socket']}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    global _verbose
    ap = argparse.ArgumentParser(prog="testbed.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument(
            "--state", default=None, help=f"state dir (default ${STATE_ENV} or {DEFAULT_STATE_DIR})"
        )
        p.add_argument("-q", "--quiet", action="store_true")
        return p

    p = add("up", "bring the testbed up (reuses a running one)")
    p.add_argument("--nodes", "-n", type=int, default=4)
    p.add_argument("--no-verify", action="store_true", help="skip the post-up checks")
    p = add("down", "stop and remove everything")
    p.add_argument("--purge", action="store_true", help="also drop the image cache")
    p = add("status", "show the testbed's health (exit 1 unless up)")
    p.add_argument("--json", action="store_true")
    for name in ("stop-sshd", "start-sshd"):
        add(name, f"{name.split('-')[0]} a node's sshd").add_argument("node")
    p = add("rekey", "give a node's sshd a new host key (known_hosts unchanged)")
    p.add_argument("node")
    p.add_argument("--restore", action="store_true", help="put the original key back")
    p.add_argument("--update-known-hosts", action="store_true")
    args = ap.parse_args(argv)
    _verbose = not args.quiet
    try:
        if args.cmd == "up":
            tb = up(args.nodes, args.state, verify=not args.no_verify)
            print(
                f"testbed up ({'reused' if tb.reused else 'created'}): "
                f"{len(tb.nodes)} nodes, state {tb.state_dir}"
            )
            print(f"cluster file: {tb.cluster_file}")
            print(f"timings: {json.dumps(tb.timings)}")
            for node in tb.nodes:
                print(f"  {node.name} ssh root@{node.ip}  docker -H unix://{node.docker_socket}")
        elif args.cmd == "down":
            down(args.state, purge=args.purge)
            print("testbed down")
        elif args.cmd == "status":
            st = status(args.state)
            if args.json:
                print(json.dumps(st, indent=2))
            else:
                _print_status(st)
            return 0 if st["up"] else 1
        elif args.cmd == "stop-sshd":
            stop_sshd(args.state, args.node)
        elif args.cmd == "start-sshd":
            start_sshd(args.state, args.node)
        elif args.cmd == "rekey":
            print(
                rekey(args.state, args.node, restore=args.restore, update_known_hosts=args.update_known_hosts)
            )
    except TestbedError as e:
        print(f"testbed {args.cmd} failed: {e}", file=sys.stderr)
        if args.cmd == "up":
            print("state kept for inspection; `scripts/testbed.sh down` cleans it up", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
