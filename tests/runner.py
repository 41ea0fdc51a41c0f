"""``sparktui`` run as an operator's shell runs it, for the tests that drive the command line
in new processes: a state folder of the test's own, and never a traceback."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.conftest import RECIPES, ROOT

TRACEBACK = "Traceback (most recent call last):\n  File"
Cli = Callable[..., subprocess.CompletedProcess[str]]


def state_env(state: Path) -> dict[str, str]:
    """This environment with sparktui's state and config folders under ``state`` and no
    cluster from the environment (each test names the test cluster's file)."""
    env = {**os.environ, "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(state / "config")}
    env.pop("SPARKTUI_CLUSTER", None)
    return env


def sparktui_cli(cluster_file: str, env: dict[str, str], recipe: Path, timeout: float = 180) -> Cli:
    """``run(VERB, *args)``: ``sparktui VERB RECIPE --cluster FILE *args`` in a new process, as
    an operator's shell runs it (``image sync`` is two words); never a traceback."""
    default_recipe, sparktui = recipe, sparktui_run(env, timeout)

    def run(*words: str, recipe: Path = default_recipe,
            timeout: float = timeout) -> subprocess.CompletedProcess[str]:
        verb = list(words[:2]) if words[0] == "image" else [words[0]]
        return sparktui(*verb, str(recipe), "--cluster", cluster_file, *words[len(verb):],
                        timeout=timeout)

    return run


def run_events(env: dict[str, str], run_id: str) -> list[dict[str, Any]]:
    """The run's events.jsonl so far, in the state folder of ``env`` (a last line still being
    written is left out)."""
    path = Path(env["XDG_STATE_HOME"]) / "sparktui" / "runs" / run_id / "events.jsonl"
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def local_env(tmp: Path) -> dict[str, str]:
    """``state_env`` for a test on the local cluster: state, config and the HF cache in ``tmp``."""
    return {**state_env(tmp / "state"), "XDG_CONFIG_HOME": str(tmp / "config"),
            "HF_HOME": str(tmp / "hf")}


def sparktui_run(env: dict[str, str], timeout: float = 120) -> Cli:
    """``run(*args)``: ``sparktui *args`` in a new process; never a traceback."""
    default_timeout = timeout

    def run(*args: str, timeout: float = default_timeout) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "sparktui", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert TRACEBACK not in proc.stderr, proc.stderr
        return proc

    return run


@contextlib.contextmanager
def watching(tmp: Path, slug: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A real ``sparktui watch`` of ``slug`` on the local cluster (state in ``tmp``; serving
    metrics on a free loopback port, so it needs no restart policy) once it says ``watching``,
    with the file its stderr goes to; stopped with SIGTERM after, which it must end by with 0."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    err = tmp / "watch.err"
    watch = subprocess.Popen([sys.executable, "-m", "sparktui", "watch", slug, "--metrics",
                              str(port)], cwd=ROOT, env=local_env(tmp),
                             stdout=subprocess.DEVNULL, stderr=err.open("wb"))
    try:
        end = time.monotonic() + 60
        while "watching" not in err.read_text():
            assert watch.poll() is None and time.monotonic() < end, err.read_text()
            time.sleep(0.1)
        yield watch, err
    finally:
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(30) == 0, err.read_text()


def local_cli(tmp: Path, recipe: str | Path, timeout: float = 120) -> Iterator[Cli]:
    """A fixture's body: ``sparktui_run`` on the local cluster with state in ``tmp``, and
    ``down RECIPE`` after the test, whatever it left running."""
    run = sparktui_run(local_env(tmp), timeout)
    yield run
    run("down", str(recipe))


def child_processes(command_has: bytes = b"") -> list[Path]:
    """This process's children (their ``/proc`` folders) whose command line holds
    ``command_has`` (a fork's is its parent's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and command_has in (proc / "cmdline").read_bytes():
                found.append(proc)
        except OSError:
            continue
    return found


def socket_inodes(command_has: bytes) -> set[str]:
    """The socket inodes held open by the processes whose command line holds ``command_has``."""
    inodes = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if command_has not in (proc / "cmdline").read_bytes():
                continue
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def listening(table: str = "/proc/net/tcp", inodes: set[str] | None = None) -> dict[int, str]:
    """Local port -> local address (hex, as the kernel writes it: ``0100007F`` is 127.0.0.1,
    ``00000000`` every interface) of each listening socket of this network namespace, or of
    those among ``inodes`` (the machine may run other servers: CI runs in its namespace)."""
    out = {}
    for row in Path(table).read_text().splitlines()[1:]:
        fields = row.split()
        address, port = fields[1].split(":")
        if fields[3] == "0A" and (inodes is None or fields[9] in inodes):  # TCP_LISTEN
            out[int(port, 16)] = address
    return out


def raw_get(port: int, target: str) -> bytes:
    """``GET target`` to 127.0.0.1:port with the request line as written, spaces and all (an
    HTTP client would encode them), and the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def secret_demo(folder: Path, *, api_key: str, hf_token: str, extra_env: str = "") -> Path:
    """The shipped demo-tp4 recipe, copied to ``folder/demo-secrets``, booting in a second with
    ``--api-key api_key`` and ``HF_TOKEN = hf_token`` (which the demo engine prints at boot, as
    the real engines print their arguments) and ``extra_env`` lines in its ``[env]``."""
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text().replace(
        '    "--demo-boot-seconds", "2",\n',
        f'    "--demo-boot-seconds", "1",\n    "--api-key", "{api_key}",\n').replace(
        'SPARKTUI_DEMO_TICK = "1"\n', f'SPARKTUI_DEMO_TICK = "1"\nHF_TOKEN = "{hf_token}"\n{extra_env}')
    recipe = folder / "demo-secrets"
    recipe.mkdir(parents=True)
    (recipe / "recipe.toml").write_text(text)
    return recipe
