"""Safe on a shared machine (issue 15), on the real 4-node test cluster: the nodes' Docker
engines are reached through unix sockets only this user can enter (no TCP port on this
machine, from the CLI or the console), the staging agent reaches the nodes over stdin (no file at a fixed path), and agent
forwarding stays off whatever the SSH config says."""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from sparktui.backend.nodeshell import SshShell
from sparktui.backend.staging import AGENT
from sparktui.core.cluster import load_cluster
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.conftest import ROOT
from tests.staging.ckpt import make_checkpoint
from tests.ui.conftest import wait_for

pytestmark = pytest.mark.realparts

DEMO = ROOT / "recipes" / "demo-tp4"
TRACEBACK = "Traceback (most recent call last):\n  File"
NOBODY = "65534"


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """The user's runtime folder (``XDG_RUNTIME_DIR``), short: a unix socket path holds 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="rt-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def env(tmp_path: Path, runtime_dir: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_RUNTIME_DIR": str(runtime_dir)}
    env.pop("SPARKTUI_CLUSTER", None)
    return env


def sparktui(env: dict[str, str], *argv: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "sparktui", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert TRACEBACK not in proc.stderr, proc.stderr
    return proc


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def tcp_sockets(pid: int) -> dict[int, str]:
    """inode -> state (``0A`` listening, ``01`` established) of every TCP socket in the process's
    network namespace (``/proc/PID/net/tcp{,6}``)."""
    found: dict[int, str] = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            found[int(cols[9])] = cols[3]
    return found


def unix_listeners(pid: int) -> dict[int, str]:
    """inode -> path of the named unix sockets listening in the process's namespace."""
    found: dict[int, str] = {}
    for line in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 8 and int(cols[3], 16) & 0x10000 and cols[7].startswith("/"):
            found[int(cols[6])] = cols[7]
    return found


def ping(path: str) -> bytes:
    """The Docker API's ``GET /_ping`` over the unix socket at ``path``."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


@contextlib.contextmanager
def following(env: dict[str, str],
              cluster_file: str) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "logs", str(DEMO), "--cluster",
                             cluster_file, "-f"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    out = proc.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in out], daemon=True).start()
    try:
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def live_line(lines: queue.Queue[str], rank: int) -> str:
    """A tick line of ``rank`` printed while following (the demo ticks every second)."""
    while True:
        line = lines.get(timeout=60)
        if line.startswith(f"r{rank} ") and "demo tick" in line:
            return line


def test_docker_is_reached_through_a_private_unix_socket_and_no_tcp_port(
        testbed: Any, env: dict[str, str], runtime_dir: Path) -> None:
    up = sparktui(env, "up", str(DEMO), "--cluster", testbed.cluster_file, "--wait")
    try:
        assert up.returncode == 0, up.stderr
        with following(env, testbed.cluster_file) as (proc, lines):
            for rank in range(4):
                live_line(lines, rank)  # following every node: every engine has been reached
            pid = proc.pid
            mine = socket_inodes(pid)
            tcp = tcp_sockets(pid)
            states = [tcp[i] for i in mine if i in tcp]
            assert "0A" not in states, f"sparktui listens on TCP: {states}"
            assert states.count("01") >= 4  # its SSH connections: the sockets were read right
            paths = sorted(path for inode, path in unix_listeners(pid).items() if inode in mine)
            assert len(paths) == 4, paths  # one forwarded Docker socket per node
            for path in paths:
                folder = Path(path).parent
                st = folder.stat()
                assert Path(path).name == "docker.sock"
                assert folder.parent == runtime_dir  # the user's runtime folder
                assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
                assert ping(path).endswith(b"\r\n\r\nOK")  # the node's engine, for its owner
                nobody = subprocess.run(
                    ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                     "/usr/bin/python3", "-I", "-c",
                     "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])", path],
                    capture_output=True, text=True, timeout=30)
                assert nobody.returncode != 0 and "PermissionError" in nobody.stderr, nobody.stderr
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0
        assert [p for p in paths if Path(p).parent.exists()] == []  # removed on the way out
    finally:
        down = sparktui(env, "down", str(DEMO), "--cluster", testbed.cluster_file)
        assert down.returncode == 0, down.stderr


async def test_the_console_listens_on_no_tcp_port_either(
        testbed: Any, env: dict[str, str], runtime_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The console runs in this process: its sockets are this process's."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
    up = sparktui(env, "up", str(DEMO), "--cluster", testbed.cluster_file, "--wait")
    try:
        assert up.returncode == 0, up.stderr
        options = ConsoleOptions([DEMO.parent], Path(testbed.cluster_file), state_root=tmp_path / "ui",
                                 recipe="demo-tp4", remember=False, telemetry_interval=1.0)
        app = SparkApp(options)
        async with app.run_test(size=(120, 40)) as pilot:
            main = app.main_screen
            await wait_for(pilot, main.ready.is_set, 30, "the recipe to open on the test cluster")
            seen = [len(main.store.lines(rank)) for rank in range(4)]
            await wait_for(pilot, lambda: all(len(main.store.lines(r)) > seen[r] for r in range(4)),
                           30, "live lines from every rank")
            pid = os.getpid()
            mine = socket_inodes(pid)
            tcp = tcp_sockets(pid)
            states = [tcp[i] for i in mine if i in tcp]
            assert "0A" not in states, f"the console listens on TCP: {states}"
            assert states.count("01") >= 4
            paths = [path for inode, path in unix_listeners(pid).items() if inode in mine]
            assert sorted(Path(p).parent.parent for p in paths) == [runtime_dir] * 4, paths
        assert list(runtime_dir.iterdir()) == []  # closed with the console
    finally:
        down = sparktui(env, "down", str(DEMO), "--cluster", testbed.cluster_file)
        assert down.returncode == 0, down.stderr


async def test_stage_sends_the_agent_over_stdin_and_never_runs_a_planted_file(
        testbed: Any, env: dict[str, str], tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    cluster = load_cluster(Path(testbed.cluster_file))
    homes = [Path(n.home) for n in testbed.nodes]
    ckpts = [make_checkpoint(home / f"hf-{tag}", seed=i) for i, home in enumerate(homes)]
    src = "/home/" + str(ckpts[0].snapshot.relative_to(homes[0]))
    folder = tmp_path / "demo-staged"
    folder.mkdir()
    (folder / "recipe.toml").write_text(
        (DEMO / "recipe.toml").read_text()
        + f'\n[[staging]]\nkind = "sparse-rows"\nid = "engram"\nsrc = "{src}"\ndst = "/home/dst-{tag}"\n')
    # where the agent used to go, as another user of the node would plant it: it marks the
    # node's own /home when run
    old = f"/tmp/sparktui-sparse-rows-{hashlib.sha256(AGENT.read_bytes()).hexdigest()[:12]}.py"
    marker = f"/home/planted-ran-{tag}"
    planted = f"open({marker!r}, 'w').write('ran')\n"
    signature = AGENT.read_text(encoding="utf-8").splitlines()[0]
    stamp = f"/home/stamp-{tag}"

    async def on_nodes(script: str, *args: str) -> list[str]:
        outs = []
        for node in cluster.nodes:
            t = SshShell(node)
            try:
                res = await t.run(["sh", "-c", script, *args], timeout=60)
            finally:
                await t.close()
            assert res.ok, res.stderr
            outs.append(res.stdout)
        return outs

    await on_nodes('printf %s "$1" > "$0" && chown 54321:54321 "$0" && chmod 755 "$0" && '
                   'touch "$2"', old, planted, stamp)
    try:
        staged = sparktui(env, "stage", str(folder), "--cluster", testbed.cluster_file)
        assert staged.returncode == 0, staged.stdout + staged.stderr
        for i, home in enumerate(homes):
            assert (home / f"dst-{tag}" / f"engram-l1-r{i}of4.bin").read_bytes() == \
                ckpts[i].expected(1, i, 4)
        found = await on_nodes(
            'test ! -e "$0" || echo "ran: $0"; test "$(cat "$1")" = "$2" || echo "planted file changed"; '
            'find /tmp /var/tmp /dev/shm /home "$HOME" -xdev -maxdepth 3 -type f -newer "$3" '
            '-exec grep -lF -e "$4" {} + 2>/dev/null; true', marker, old, planted.rstrip("\n"), stamp,
            signature)
        assert found == [""] * 4, found  # never run, never changed, no agent file anywhere
    finally:
        await on_nodes(f'rm -rf "$0" "$1" "$2" /home/hf-{tag} /home/dst-{tag}', old, marker, stamp)


@pytest.fixture
def agent(tmp_path: Path, testbed: Any) -> Iterator[str]:
    """An ssh-agent holding the test cluster's key; its socket path."""
    sock = str(tmp_path / "agent.sock")
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            threading.Event().wait(0.05)
        added = subprocess.run(["ssh-add", testbed.identity], env={**os.environ, "SSH_AUTH_SOCK": sock},
                               capture_output=True, text=True, timeout=30)
        assert added.returncode == 0, added.stderr
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def without_identity(testbed: Any, tmp_path: Path) -> Path:
    """The test cluster's file with ``ssh.identity`` left out: the key comes from the agent."""
    text = Path(testbed.cluster_file).read_text()
    path = tmp_path / "cluster.toml"
    path.write_text("\n".join(line for line in text.splitlines() if not line.startswith("identity")))
    return path


async def test_agent_forwarding_is_off_whatever_the_ssh_config_says(
        testbed: Any, tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    (home / ".ssh" / "config").write_text("Host *\n    ForwardAgent yes\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SSH_AUTH_SOCK", agent)
    node = load_cluster(without_identity(testbed, tmp_path)).nodes[0]
    probe = 'echo "agent=${SSH_AUTH_SOCK-}"'
    # the setup forwards when asked: asyncssh reads that config and the node's sshd allows it
    async with asyncssh.connect(node.host, port=node.ssh_port, username="root",
                                known_hosts=node.ssh.known_hosts) as conn:
        res = await conn.run(probe, check=True)
        assert str(res.stdout).startswith("agent=/"), res.stdout
    transport = SshShell(node)
    try:
        res2 = await transport.run(["sh", "-c", probe])  # logged in with the agent's key
        assert res2.ok and res2.stdout == "agent=\n", res2
    finally:
        await transport.close()


def test_encrypted_default_key_without_an_agent_says_so(testbed: Any, env: dict[str, str],
                                                        tmp_path: Path) -> None:
    """asyncssh skips an encrypted default key silently when no agent holds it: the refused
    login then says why, instead of only "Permission denied"."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    key = home / ".ssh" / "id_ed25519"
    asyncssh.read_private_key(testbed.identity).write_private_key(str(key), "pkcs8-pem", passphrase="pw")
    key.chmod(0o600)
    env = {**env, "HOME": str(home)}
    env.pop("SSH_AUTH_SOCK", None)
    res = sparktui(env, "status", str(DEMO), "--cluster", str(without_identity(testbed, tmp_path)))
    said = " ".join((res.stdout + res.stderr).split())
    assert ("~/.ssh/id_ed25519 is encrypted and sparktui does not ask for passphrases, and no "
            "ssh-agent is running (SSH_AUTH_SOCK is not set): start one") in said, said
