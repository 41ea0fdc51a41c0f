"""A demo run on the local cluster whose engine prints its API key and HF_TOKEN at boot (as
vLLM and SGLang print their arguments): the ranks' command lines never hold the key, no run
file and no ``logs`` output holds either value, and nothing under the state folder can be read
by another user (checked as ``nobody``). Fixed ports: run it in a private network namespace."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.conftest import ROOT
from tests.runner import local_env, secret_demo, sparktui_run

API_KEY = "sk-live-private-7319"
HF_TOKEN = "hf_private_token_8842"
SECRETS = (API_KEY.encode(), HF_TOKEN.encode())
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder every user can enter (tmp_path's parents are root's alone, which would hide a
    loose file from ``nobody``), with a state folder open to all, as ``~/.local/state`` often
    is: what decides who reads sparktui's files is sparktui's own modes."""
    folder = Path(tempfile.mkdtemp(prefix="sparktui-private-"))
    os.chmod(folder, 0o755)
    (folder / "state").mkdir()
    os.chmod(folder / "state", 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def readable_by_nobody(paths: list[Path]) -> list[str]:
    """The paths user ``nobody`` can read (a file) or list (a folder)."""
    script = ('for p; do if [ -d "$p" ]; then ls -- "$p" >/dev/null 2>&1 && echo "$p"; '
              'else cat -- "$p" >/dev/null 2>&1 && echo "$p"; fi; done')
    proc = subprocess.run([*AS_NOBODY, "sh", "-c", script, "_", *map(str, paths)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.split()


def follow_briefly(env: dict[str, str], recipe: Path) -> str:
    """``sparktui logs -f`` for a few seconds and until it has printed the engine's dump of its
    arguments (a busy box starts it late), then Ctrl-C: what it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "logs", str(recipe), "-f"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    out: list[bytes] = []

    def read(stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            out.append(line)

    reader = threading.Thread(target=read, args=(proc.stdout,), daemon=True)
    reader.start()
    started = time.monotonic()
    try:
        while time.monotonic() < started + 60 and (
                time.monotonic() < started + 4 or not any(b"ServerArgs(" in line for line in out)):
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:  # no process outlives the test
            proc.kill()
            proc.wait()
    reader.join(10)
    return b"".join(out).decode("utf-8", "replace")


def leaks(root: Path) -> list[Path]:
    """Files under ``root`` holding either secret; ``meta.json`` (0600) is the rank's env, which
    the shim needs to start it, as docker keeps a container's."""
    return [p for p in root.rglob("*") if p.is_file() and p.name != "meta.json"
            and [s for s in SECRETS if s in p.read_bytes()]]


def test_a_demo_run_keeps_its_secrets_and_files_private(base: Path) -> None:
    env = local_env(base)
    recipe = secret_demo(base / "recipes", api_key=API_KEY, hf_token=HF_TOKEN)
    cli = sparktui_run(env)
    root = base / "state" / "sparktui"
    try:
        up = cli("up", str(recipe), "--wait")
        assert up.returncode == 0, up.stdout + up.stderr

        # every rank gets its key through the environment, never on its command line
        pids = [json.loads(p.read_text())["child_pid"] for p in root.glob("local/local-*/pids.json")]
        assert len(pids) == 4
        for pid in pids:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert b"--api-key\0********\0" in cmdline
            assert not [s for s in SECRETS if s in cmdline], cmdline
            environ = dict(v.split(b"=", 1) for v in
                           Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in v)
            given = json.loads(environ[b"SPARKTUI_SECRET_ARGS"])  # put back at the masks' places
            words = cmdline.split(b"\0")
            after = words[[w.endswith(b"secret_argv.py") for w in words].index(True) + 1:]
            assert [(after[int(i)], t) for i, t in given.items()] == [(b"********", API_KEY)]

        # the engine printed both values at boot; the run's files hold the mask
        r0 = next(root.glob("runs/*/r0.log")).read_text()
        assert "api_key='********'" in r0 and "hf_token='********'" in r0, r0[:2000]
        outputs = {
            "logs": cli("logs", str(recipe)),
            "logs --grep": cli("logs", str(recipe), "--grep", "ServerArgs"),
            "logs --raw": cli("logs", str(recipe), "--raw"),
        }
        assert "api_key='********'" in outputs["logs --grep"].stdout
        followed = follow_briefly(env, recipe)
        assert "ServerArgs(" in followed
        for name, text in [*((k, p.stdout + p.stderr) for k, p in outputs.items()),
                           ("logs -f", followed)]:
            assert not [s for s in SECRETS if s.decode() in text], name
        assert len(list(root.glob("local/local-*/output.log"))) == 4
        assert leaks(root) == []
    finally:
        down = cli("down", str(recipe))
    assert down.returncode == 0, down.stderr

    assert leaks(root) == []
    paths = [root, *sorted(root.rglob("*"))]
    for path in paths:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {mode:o}"
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs this test as root: it reads the state folder as user nobody")
        pytest.skip("reading the state folder as another user takes root (setpriv)")
    assert readable_by_nobody([base / "state"]) == [str(base / "state")]  # the check can read
    assert readable_by_nobody(paths) == []
