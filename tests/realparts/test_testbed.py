"""The local test cluster (sparktui_testbed) works, checked with real parts only.

Real OpenSSH servers reached with asyncssh (host keys verified against the testbed's
known_hosts), real Docker engines reached with the docker SDK through an SSH tunnel to each
node's /var/run/docker.sock, the node's private /home, TCP between containers on two nodes,
and a changed host key being refused.

Needs root, `ip netns`, sshd and dockerd; skips otherwise, except under CI=true where it fails.
Env: SPARKTUI_TESTBED (state dir), SPARKTUI_TESTBED_NODES (default 4),
SPARKTUI_TESTBED_KEEP=1 (leave a testbed this session started running).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import sparktui_testbed as tbm
from tests.conftest import IN_CI
from tests.realparts.conftest import IMAGE

pytestmark = pytest.mark.realparts

# ----------------------------------------------------------------------------- helpers


async def _connect(tb: Any, node: Any, known_hosts: str | None = None) -> Any:
    import asyncssh

    return await asyncssh.connect(
        node.ip,
        port=node.ssh_port,
        username="root",
        client_keys=[tb.identity],
        known_hosts=known_hosts or tb.known_hosts,
        agent_path=None,
        config=None,
        connect_timeout=10,
    )


@contextlib.asynccontextmanager
async def _docker(tb: Any, node: Any) -> AsyncIterator[Any]:
    """docker SDK client for node's own engine, through an SSH tunnel to its socket."""
    import docker

    async with await _connect(tb, node) as conn:
        listener = await conn.forward_local_port_to_path("127.0.0.1", 0, node.docker_socket_in_node)
        # the SDK blocks: keep it off the event loop thread that carries the tunnel
        client = await asyncio.to_thread(
            docker.DockerClient, base_url=f"tcp://127.0.0.1:{listener.get_port()}", timeout=30
        )
        try:
            yield client
        finally:
            await asyncio.to_thread(client.close)
            listener.close()


def _known_host_key(tb: Any, node: Any) -> str:
    for line in Path(tb.known_hosts).read_text().splitlines():
        host, kind, key = line.split()[:3]
        if host == node.ip:
            return f"{kind} {key}"
    raise AssertionError(f"{node.ip} not in {tb.known_hosts}")


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=120))


def _output(client: Any, cmd: list[str], **kwargs: Any) -> str:
    """Run IMAGE to its end and return its output (blocking: call through to_thread).

    `containers.run(..., remove=True)` reads the logs once, right after the wait, and a
    container that exits at once can have its output still on the way to the log file
    then (the engine copies it asynchronously): every command here ends its output with a
    newline, so the logs are read until that newline arrives.
    """
    import time

    container = client.containers.run(IMAGE, cmd, detach=True, **kwargs)
    try:
        container.wait(timeout=60)
        deadline = time.monotonic() + 10
        while True:
            out = container.logs(stdout=True, stderr=True).decode()
            if out.endswith("\n") or time.monotonic() > deadline:
                return out.strip()
            time.sleep(0.05)
    finally:
        container.remove(force=True)


# ----------------------------------------------------------------------------- tests


def test_cluster_file_describes_the_testbed(testbed: Any) -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    cluster = tomllib.loads(Path(testbed.cluster_file).read_text())
    assert cluster["ssh"] == {
        "user": "root",
        "identity": testbed.identity,
        "known_hosts": testbed.known_hosts,
    }
    assert cluster["docker"] == {"socket": "/var/run/docker.sock", "gpus": "none"}
    assert [(n["name"], n["host"], n["fabric_ip"]) for n in cluster["nodes"]] == [
        (n.name, n.ip, n.ip) for n in testbed.nodes
    ]
    hosts = [line.split()[0] for line in Path(testbed.known_hosts).read_text().splitlines()]
    assert hosts == [n.ip for n in testbed.nodes]
    assert tbm.load(testbed.state_dir).image_id == testbed.image_id


def test_ssh_to_every_node_with_verified_host_key(testbed: Any) -> None:
    async def one(node: Any) -> None:
        async with await _connect(testbed, node) as conn:
            assert (
                conn.get_server_host_key().export_public_key().decode().split()[:2]
                == _known_host_key(testbed, node).split()
            )
            res = await conn.run("ip -4 -o addr show dev eth0; stat -c %i /home", check=True)
            out = str(res.stdout)
            assert f"{node.ip}/24" in out
            others = [n.ip for n in testbed.nodes if n is not node]
            assert not any(f"{ip}/" in out for ip in others)
            # the node's /home is <state>/node{i}/home, not the machine's /home
            assert out.split()[-1] == str(os.stat(node.home).st_ino)

    async def main() -> None:
        await asyncio.gather(*(one(n) for n in testbed.nodes))

    _run(main())


def test_docker_engine_of_every_node_through_ssh_tunnel(testbed: Any) -> None:
    probe = (
        "import json, asyncio, http.server, hashlib, ssl, socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "s.connect(('10.250.0.1', 9))\n"  # UDP connect: picks the source address, sends nothing
        "print(s.getsockname()[0])\n"
    )

    async def one(node: Any) -> tuple[str, str]:
        async with _docker(testbed, node) as client:
            info = await asyncio.to_thread(client.info)
            assert info["DockerRootDir"] == node.docker_data_root  # the node's own engine
            image = await asyncio.to_thread(client.images.get, IMAGE)
            out = await asyncio.to_thread(
                _output, client, ["python3", "-c", probe], network_mode="host", init=True
            )
            return image.id, out

    async def main() -> list[tuple[str, str]]:
        return list(await asyncio.gather(*(one(n) for n in testbed.nodes)))

    results = _run(main())
    assert {image_id for image_id, _ in results} == {testbed.image_id}
    assert [ip for _, ip in results] == [n.ip for n in testbed.nodes]


def test_home_is_private_to_each_node(testbed: Any) -> None:
    a, b = testbed.nodes[0], testbed.nodes[1]
    token = uuid.uuid4().hex[:12]
    rel = f"kilork/mia-state/engram/testbed-{token}"
    path = f"/home/{rel}"

    async def main() -> None:
        async with await _connect(testbed, a) as conn_a, await _connect(testbed, b) as conn_b:
            async with conn_a.start_sftp_client() as sftp:
                await sftp.makedirs(os.path.dirname(path), exist_ok=True)
                async with sftp.open(path, "w") as f:
                    await f.write(token)
            try:
                assert (await conn_a.run(f"cat {path}", check=True)).stdout == token
                assert (await conn_b.run(f"test -e {path}")).exit_status == 1
                async with conn_b.start_sftp_client() as sftp_b:
                    assert not await sftp_b.exists(path)
                # containers bind-mount from their node's /home (both nodes at once)
                cmd = ["sh", "-c", f"cat /mnt/testbed-{token} 2>/dev/null || echo absent"]

                async def seen(node: Any) -> str:
                    async with _docker(testbed, node) as client:
                        return await asyncio.to_thread(
                            _output,
                            client,
                            cmd,
                            network_mode="host",
                            volumes={"/home/kilork/mia-state/engram": {"bind": "/mnt", "mode": "ro"}},
                        )

                assert await asyncio.gather(seen(a), seen(b)) == [token, "absent"]
            finally:
                await conn_a.run(f"rm -f {path}")

    _run(main())
    assert not Path(path).exists()  # not in the machine's own /home either


def test_containers_on_two_nodes_talk_tcp(testbed: Any) -> None:
    a, b = testbed.nodes[0], testbed.nodes[-1]
    port = 29123
    server = (
        "import socket\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('0.0.0.0', {port})); s.listen(1); s.settimeout(30)\n"
        "c, peer = s.accept(); c.sendall(('hello ' + peer[0]).encode()); c.close()\n"
    )
    client_code = (
        "import socket, time\n"
        "for _ in range(200):\n"
        "    try:\n"
        f"        c = socket.create_connection(({a.ip!r}, {port}), timeout=3); break\n"
        "    except OSError: time.sleep(0.1)\n"
        "print(c.recv(64).decode())\n"
    )

    async def main() -> str:
        async with _docker(testbed, a) as da, _docker(testbed, b) as db:
            listener = await asyncio.to_thread(
                da.containers.run,
                IMAGE,
                ["python3", "-c", server],
                detach=True,
                network_mode="host",
                init=True,
            )
            try:
                return await asyncio.to_thread(
                    _output, db, ["python3", "-c", client_code], network_mode="host", init=True
                )
            finally:
                await asyncio.to_thread(listener.remove, force=True)

    assert _run(main()) == f"hello {b.ip}"


def test_changed_host_key_is_refused(testbed: Any) -> None:
    import asyncssh

    node = testbed.nodes[-1]

    async def try_connect() -> None:
        async with await _connect(testbed, node) as conn:
            await conn.run("true", check=True)

    _run(try_connect())
    new_key = tbm.rekey(testbed.state_dir, node.name)
    try:
        assert new_key != _known_host_key(testbed, node)
        with pytest.raises(asyncssh.HostKeyNotVerifiable):
            _run(try_connect())
    finally:
        tbm.rekey(testbed.state_dir, node.name, restore=True)
    _run(try_connect())


def test_stop_sshd_cuts_the_connection_and_start_sshd_restores_it(testbed: Any) -> None:
    node = testbed.nodes[-1]

    async def main() -> None:
        conn = await _connect(testbed, node)
        try:
            await conn.run("true", check=True)
            await asyncio.to_thread(tbm.stop_sshd, testbed.state_dir, node.name)
            await asyncio.wait_for(conn.wait_closed(), timeout=10)
            with pytest.raises(OSError):
                await _connect(testbed, node)
        finally:
            conn.close()
            await asyncio.to_thread(tbm.start_sshd, testbed.state_dir, node.name)
        async with await _connect(testbed, node) as again:
            assert (await again.run("echo back", check=True)).stdout == "back\n"

    _run(main())


def test_login_shell_changes_one_node_only_and_is_put_back(testbed: Any) -> None:
    node = testbed.nodes[1]

    async def shell_of(which: Any) -> str:
        async with await _connect(testbed, which) as conn:
            # a command string read by the login shell itself: fish has $FISH_VERSION
            return (await conn.run("echo $FISH_VERSION\"_\"", check=False)).stdout.strip()

    if not Path("/usr/bin/fish").is_file():
        (pytest.fail if IN_CI else pytest.skip)("fish is not installed (./dev test installs it)")
    host_passwd = Path("/etc/passwd").read_bytes()
    tbm.login_shell(testbed.state_dir, node.name, "/usr/bin/fish")
    try:
        assert _run(shell_of(node)) != "_"  # fish said its version
        assert _run(shell_of(testbed.nodes[0])) == "_"  # bash: an unset variable
        assert Path("/etc/passwd").read_bytes() == host_passwd
    finally:
        tbm.login_shell(testbed.state_dir, node.name, None)
    assert _run(shell_of(node)) == "_"


def test_links_are_this_network_namespaces_own() -> None:
    """Under ``unshare -n`` (how the benches and lanes run) the testbed sees the devices of its
    own namespace, not sysfs's: a bridge it made there is found again by ``down`` and the next
    ``up`` (a bench of two cluster sizes rebuilt the cluster in one namespace and was refused)."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("unshare"):
        (pytest.fail if IN_CI else pytest.skip)("needs root and unshare")
    probe = (
        "import subprocess\n"
        "from sparktui_testbed.netns import link_exists, links\n"
        "before = links()\n"
        "subprocess.run(['ip', 'link', 'add', 'sptbprobe0', 'type', 'bridge'], check=True)\n"
        "print(before, link_exists('sptbprobe0'), links())\n"
    )
    out = subprocess.run(["unshare", "-n", sys.executable, "-c", probe], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    assert out.strip() == "['lo'] True ['lo', 'sptbprobe0']"
