"""The testbed's lifecycle, the public API: up, down, status, load, and per-node sshd control.

`up` is idempotent and cheap when the testbed is already healthy (the test fixture and the
benches call it every session): it reuses what runs, restarting a stopped sshd and reloading
a stale image; otherwise it tears down whatever is left and builds all nodes cold, then
verifies them. Every mutating call holds the state dir lock, so concurrent callers serialise.
`down` works from names alone and also cleans up after a half-failed `up`. Slurm (slurm.py)
is part of every testbed: it comes up while the engines start, a reused testbed gets what a
test stopped of it back, and `down` stops it with the login node.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from . import daemons, docker_api, faults, slurm
from .config import (
    BRIDGE,
    BRIDGE_IP,
    IMAGE,
    LOGIN,
    MAX_NODES,
    NETNS_RE,
    STORAGE_DRIVER_ENV,
    T_LOAD,
    T_SLURM,
    VETH_RE,
)
from .host import check_host
from .image import build_image
from .layout import Node, Paths, Slurm, Testbed, locked, write_cluster_file, write_slurm_cluster_file
from .loginshell import set_login_shell
from .mounts import is_mountpoint, mounts, ns_dir_private, setup_mntns, umount_under, under
from .netns import leftovers, link_exists, remove_forward_rule, setup_bridge, setup_netns
from .procs import daemon_pid, ns_file_inode, tcp_open
from .runner import TestbedError, log, parallel, run, set_verbose, step
from .verify import verify_testbed


def load(state_dir: str | os.PathLike[str] | None = None) -> Testbed | None:
    """The testbed described by <state>/testbed.json, or None."""
    paths = Paths(state_dir)
    try:
        return Testbed.from_json(json.loads(paths.info.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _health(tb: Testbed) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for node in tb.nodes:
        dockerd = daemon_pid(node.docker_pidfile, node.docker_data_root)
        sshd = daemon_pid(node.ssh_pidfile, node.sshd_config)
        ping = bool(dockerd) and docker_api.ping(node.docker_socket)
        out[node.name] = {
            "netns": ns_file_inode(node.netns_path) is not None,
            "mntns": ns_file_inode(node.mntns) is not None,
            "sshd_pid": sshd,
            "ssh_port_open": bool(sshd) and tcp_open(node.ip, node.ssh_port),
            "dockerd_pid": dockerd,
            "docker_ping": ping,
            "image_id": docker_api.image_id(node.docker_socket) if ping else None,
        }
    return out


def status(state_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Machine-readable health of the testbed."""
    paths = Paths(state_dir)
    tb = load(paths.sd)
    if tb is None:
        left = leftovers()
        return {"state_dir": str(paths.sd), "up": False, "leftovers": left}
    health = _health(tb)
    slurm_health = slurm.health(tb.slurm, tb.nodes) if tb.slurm else None
    ok = (
        link_exists(BRIDGE)
        and all(
            h["netns"] and h["mntns"] and h["ssh_port_open"] and h["docker_ping"]
            and h["image_id"] == tb.image_id
            for h in health.values()
        )
        and slurm_health is not None
        and slurm.healthy(slurm_health)
    )
    return {
        "state_dir": str(paths.sd),
        "up": ok,
        "testbed": tb.to_json(),
        "health": health,
        "slurm": slurm_health,
    }


def up(
    n: int = 4,
    state_dir: str | os.PathLike[str] | None = None,
    *,
    verify: bool = True,
    verbose: bool | None = None,
) -> Testbed:
    """Bring the testbed up (or reuse it when it is already up with n nodes)."""
    set_verbose(verbose)
    if not 1 <= n <= MAX_NODES:
        raise TestbedError(f"--nodes must be 1..{MAX_NODES}")
    problems = check_host()
    if problems:
        raise TestbedError("this machine cannot run the testbed: " + "; ".join(problems))
    paths = Paths(state_dir)
    with locked(paths):
        t0 = time.monotonic()
        tb = load(paths.sd)
        if tb is not None and len(tb.nodes) == n:
            reused = _try_reuse(tb, paths)
            if reused is not None:
                reused.timings["up_warm_s"] = round(time.monotonic() - t0, 2)
                log(f"testbed already up ({n} nodes), reused in {reused.timings['up_warm_s']}s")
                return reused
            log("testbed is not healthy; rebuilding it")
        elif tb is not None:
            log(f"testbed has {len(tb.nodes)} nodes, {n} wanted; rebuilding it")
        problems = _down_locked(paths, purge=False)
        if problems:
            raise TestbedError("cleanup before up failed:\n  " + "\n  ".join(problems))
        tb = _up_cold(n, paths, verify=verify)
        tb.timings["up_cold_s"] = round(time.monotonic() - t0, 2)
        paths.info.write_text(json.dumps(tb.to_json(), indent=2) + "\n")
        log(f"testbed up: {n} nodes in {tb.timings['up_cold_s']}s")
        return tb


def _try_reuse(tb: Testbed, paths: Paths) -> Testbed | None:
    if not link_exists(BRIDGE):
        return None
    for said in faults.mend_all(tb):  # what a fault test or the chaos soak left
        log(f"reuse: {said}")
    health = _health(tb)
    for node in tb.nodes:
        h = health[node.name]
        if not (h["netns"] and h["mntns"] and h["docker_ping"]):
            return None
    # sshd may have been stopped by a test: restart it
    dead_sshd = [node for node in tb.nodes if not health[node.name]["ssh_port_open"]]
    if dead_sshd:
        log("restarting sshd on " + ", ".join(n.name for n in dead_sshd))
        parallel(dead_sshd, daemons.start_sshd)
    archive, image_id, inputs = build_image(paths)
    stale = [node for node in tb.nodes if health[node.name]["image_id"] != image_id]
    if stale:
        log(f"loading image {image_id[:19]} into " + ", ".join(n.name for n in stale))

        def reload(node: Node) -> None:
            _load_image(node, archive, image_id)
            old = health[node.name]["image_id"]
            if old and old != image_id:  # drop the superseded image unless a container uses it
                with contextlib.suppress(OSError):
                    docker_api.request(node.docker_socket, "DELETE", f"/images/{old}", timeout=30)

        parallel(stale, reload)
    if stale or image_id != tb.image_id:
        tb.image_id, tb.image_inputs, tb.image_archive = image_id, inputs, archive
        paths.info.write_text(json.dumps(tb.to_json(), indent=2) + "\n")
    if not _reuse_slurm(tb):
        t0 = time.monotonic()
        log("starting slurm on the running testbed")
        problems = slurm.stop(paths, tb.nodes)
        if problems:
            raise TestbedError("stopping what was left of slurm failed:\n  " + "\n  ".join(problems))
        tb.slurm = slurm.start(paths, tb.nodes)
        write_slurm_cluster_file(tb.slurm, paths, tb.nodes)  # slurm.stop took the old one away
        slurm.verify(tb.slurm, paths, tb.nodes)
        tb.timings["slurm_s"] = round(time.monotonic() - t0, 2)
        paths.info.write_text(json.dumps(tb.to_json(), indent=2) + "\n")
    tb.reused = True
    return tb


def _reuse_slurm(tb: Testbed) -> bool:
    if tb.slurm is None:
        return False
    try:
        return slurm.repair(tb.slurm, Paths(tb.state_dir), tb.nodes)
    except TestbedError as e:
        log(f"slurm cannot be reused: {e}")
        return False


def _load_image(node: Node, archive: str, image_id: str) -> None:
    with step(node.name, "load image"):
        docker_api.load(node.docker_socket, archive)
        got = docker_api.image_id(node.docker_socket)
        if got != image_id:
            raise TestbedError(f"{IMAGE} has id {got}, expected {image_id}")


def _up_cold(n: int, paths: Paths, *, verify: bool) -> Testbed:
    timings: dict[str, float] = {}
    t = time.monotonic()

    def lap(name: str) -> None:
        nonlocal t
        now = time.monotonic()
        timings[name] = round(now - t, 2)
        t = now

    nodes = [paths.node(i) for i in range(n)]
    with step(None, "state dir"):
        paths.sd.mkdir(parents=True, exist_ok=True)
        os.chmod(paths.sd, 0o755)
        for node in nodes:
            for d in (node.dir, node.home, node.run_dir, os.path.join(node.home, "hf")):
                Path(d).mkdir(parents=True, exist_ok=True)
        paths.docker_cli.mkdir(exist_ok=True)

    # the image build does not depend on the nodes: overlap it with the node setup; Slurm
    # does not need the engines: it comes up while they start
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        image_future = ex.submit(build_image, paths)

        with step(None, "keys"):
            daemons.keygen(paths.identity, "sparktui-testbed-client")
            paths.authorized_keys.write_text(daemons.pubkey_line(paths.identity) + "\n")
            for node in nodes:
                daemons.keygen(node.host_key, f"sparktui-testbed-{node.name}")
                Path(node.sshd_config).write_text(daemons.sshd_config(node, paths, node.host_key))
            daemons.write_known_hosts(paths, nodes)
        lap("keys_s")

        setup_bridge()
        for node in nodes:
            setup_netns(node)
        lap("network_s")
        with step(None, "mount namespaces"):
            ns_dir_private(paths)
        for node in nodes:
            setup_mntns(node, paths)
        lap("mount_ns_s")

        parallel(nodes, daemons.start_sshd)
        lap("sshd_s")
        slurm_future = ex.submit(_timed_slurm_start, paths, nodes)

        driver = os.environ.get(STORAGE_DRIVER_ENV) or "overlay2"

        def start_engine(node: Node) -> None:
            try:
                daemons.start_dockerd(node, paths, driver)
                node.storage_driver = driver
            except TestbedError as e:
                if driver != "overlay2" or os.environ.get(STORAGE_DRIVER_ENV):
                    raise
                log(f"{node.name}: overlay2 failed, falling back to vfs ({e})")
                daemons.start_dockerd(node, paths, "vfs")
                node.storage_driver = "vfs"
            info = docker_api.info(node.docker_socket)
            if info.get("Driver") != node.storage_driver:
                raise TestbedError(
                    f"{node.name}: dockerd uses storage driver "
                    f"{info.get('Driver')!r}, asked for {node.storage_driver}"
                )

        parallel(nodes, start_engine)
        lap("dockerd_s")

        with step(None, "build image"):
            archive, image_id, inputs = image_future.result(timeout=T_LOAD)
        lap("image_build_wait_s")
        parallel(nodes, lambda node: _load_image(node, archive, image_id))
        lap("image_load_s")
        with step(None, "slurm"):
            slurm_cluster, timings["slurm_s"] = slurm_future.result(timeout=4 * T_SLURM)
        lap("slurm_wait_s")

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
        slurm=slurm_cluster,
    )
    write_cluster_file(paths, nodes)
    if slurm_cluster is not None:
        write_slurm_cluster_file(slurm_cluster, paths, nodes)
    paths.info.write_text(json.dumps(tb.to_json(), indent=2) + "\n")
    if verify:
        verify_testbed(tb, paths)
        slurm.verify(slurm_cluster, paths, nodes)
        lap("verify_s")
    return tb


def _timed_slurm_start(paths: Paths, nodes: list[Node]) -> tuple[Slurm, float]:
    t0 = time.monotonic()
    s = slurm.start(paths, nodes)
    return s, round(time.monotonic() - t0, 2)


def down(
    state_dir: str | os.PathLike[str] | None = None, *, purge: bool = False, verbose: bool | None = None
) -> None:
    """Stop and remove everything the testbed made (also after a half-failed up).
    The image cache in <state>/cache is kept unless purge=True."""
    set_verbose(verbose)
    paths = Paths(state_dir)
    if not paths.sd.exists() and not leftovers():
        return
    with locked(paths):
        problems = _down_locked(paths, purge=purge)
    if problems:
        raise TestbedError("down left something behind:\n  " + "\n  ".join(problems))


def _down_locked(paths: Paths, *, purge: bool) -> list[str]:
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
    for item in leftovers():
        name = item.split()[-1]  # "netns sptb-node0", "link sptb-v0"
        m = NETNS_RE.match(name) or VETH_RE.match(name)
        if m:
            indices.add(int(m.group(1)))
    login = paths.login()
    has_login = any(Path(p).exists() for p in (login.netns_path, login.mntns, login.dir))
    if not indices and not has_login and not link_exists(BRIDGE):
        remove_forward_rule()
        return _cleanup_files(paths, purge)
    # the login node (munged, slurmctld, its sshd) goes with the nodes (each slurmd and step)
    nodes = [paths.node(i) for i in sorted(indices)] + ([login] if has_login else [])
    log("down: stopping " + ", ".join(n.name for n in nodes))
    problems: list[str] = []
    if nodes:
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(nodes)) as ex:
            for res in ex.map(daemons.stop_node, nodes):
                problems += res
    remove_forward_rule()
    if link_exists(BRIDGE):
        cp = run(["ip", "link", "del", BRIDGE], what="ip link del", check=False)
        if cp.returncode != 0:
            problems.append(f"ip link del {BRIDGE}: {cp.stderr.decode().strip()}")
    problems += [f"could not unmount {mp}" for mp in umount_under(paths.sd)]
    problems += _cleanup_files(paths, purge)
    problems += [f"left behind: {x}" for x in leftovers()]
    log("down: done" + (f" with {len(problems)} problems" if problems else ""))
    return problems


def _cleanup_files(paths: Paths, purge: bool) -> list[str]:
    problems: list[str] = []
    if not paths.sd.exists():
        return problems
    if is_mountpoint(paths.sd) or any(under(mp, str(paths.sd)) for mp, _ in mounts()):
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


def _with_node(state_dir: str | os.PathLike[str] | None, which: str | int) -> tuple[Paths, Testbed, Node]:
    paths = Paths(state_dir)
    tb = load(paths.sd)
    if tb is None:
        raise TestbedError(f"no testbed in {paths.sd} (run `python -m sparktui_testbed up` first)")
    if which == LOGIN and tb.slurm is not None:  # the Slurm login node: its sshd as a node's
        return paths, tb, tb.slurm.login
    return paths, tb, tb.node(which)


def stop_sshd(state_dir: str | os.PathLike[str] | None, node: str | int) -> None:
    """Kill the node's sshd and every SSH connection to it (the port then refuses)."""
    paths, _, nd = _with_node(state_dir, node)
    with locked(paths):
        daemons.stop_sshd(nd)


def start_sshd(state_dir: str | os.PathLike[str] | None, node: str | int) -> None:
    """Start the node's sshd again (no-op when it is running); the login node's in its own UTS
    namespace, named ``login``, as it was started."""
    paths, _, nd = _with_node(state_dir, node)
    with locked(paths):
        daemons.start_sshd(nd, hostname=LOGIN if node == LOGIN else None)


def login_shell(state_dir: str | os.PathLike[str] | None, node: str | int,
                shell: str | None, user: str = "root") -> None:
    """Give ``user`` the login shell ``shell`` on this node only (None: the machine's own);
    connections opened afterwards run their commands through it."""
    paths, _, nd = _with_node(state_dir, node)
    with locked(paths), step(nd.name, "login shell"):
        set_login_shell(nd, user, shell)


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
    with locked(paths), step(nd.name, "rekey"):
        if restore:
            key = nd.host_key
        else:
            key = nd.host_key + ".rekeyed"
            daemons.keygen(key, f"sparktui-testbed-{nd.name}-rekeyed")
        Path(nd.sshd_config).write_text(daemons.sshd_config(nd, paths, key))
        daemons.stop_sshd(nd)
        daemons.start_sshd(nd)
        if update_known_hosts:
            daemons.write_known_hosts(paths, tb.nodes)
            if tb.slurm:
                daemons.write_known_hosts(paths, [*tb.nodes, tb.slurm.login], tb.slurm.known_hosts)
        return daemons.pubkey_line(key)

