"""A container's text never drives the operator's terminal: a demo rank that prints an OSC
title sequence (``ESC ]0;title BEL``), a CSI clear-screen and a carriage return is shown with
those characters written out (``\\x1b``; the carriage return is dropped when the line is
stored) by ``logs``, ``logs --grep``, ``logs -f``, ``status``, the event lines of ``up`` and the
failure report of ``up --wait``; ``logs --raw`` writes them as they came.

Runs real ranks on the local cluster (fixed ports: run it in a private network namespace).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import RECIPES, ROOT

DEMO = RECIPES / "demo-tp4" / "recipe.toml"
ESCAPES = "\x1b]0;title\x07\x1b[2J\r"
FLAG = f"--x{ESCAPES}end"  # the demo logs the names of the flags it ignores
SHOWN = "--x\\x1b]0;title\\x07\\x1b[2Jend"  # a CR never reaches the run's files
TRACEBACK = "Traceback (most recent call last):\n  File"
Cli = Callable[..., subprocess.CompletedProcess[str]]


def no_controls(text: str) -> bool:
    """Nothing a terminal would obey: no ESC, BEL or CR (tabs and newlines are fine)."""
    return not any(ch in text for ch in "\x1b\x07\r\x9b\x9d")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": "400",
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "HF_HOME": str(tmp_path / "hf")}
    env.pop("SPARKTUI_CLUSTER", None)
    return env


@pytest.fixture
def cli(env: dict[str, str]) -> Iterator[Cli]:
    made: list[str] = []

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        if args[0] == "up":
            made.append(args[1])
        proc = subprocess.run([sys.executable, "-m", "sparktui", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert TRACEBACK not in proc.stderr, proc.stderr
        return proc

    yield run
    for recipe in made:
        run("down", recipe)


def demo_recipe(tmp_path: Path) -> Path:
    """The demo recipe whose ranks print the escapes at boot; seeing them is fatal, so every
    rank fails with that line as its detail."""
    text = DEMO.read_text()
    text = text.replace('    "--demo-boot-seconds", "2",\n',
                        f'    "--demo-boot-seconds", "2",\n    {json.dumps(FLAG)},\n')
    text = text.replace('must_not_show = ["Traceback (most recent call last):"]',
                        'must_not_show = ["Traceback (most recent call last):", "re:0;title"]')
    folder = tmp_path / "recipes" / "demo-escapes"
    folder.mkdir(parents=True)
    (folder / "recipe.toml").write_text(text)
    return folder


def test_logs_and_failures_show_escapes_as_text(cli: Cli, tmp_path: Path) -> None:
    r = str(demo_recipe(tmp_path))
    up = cli("up", r, "--wait")
    assert up.returncode == 1, up.stdout + up.stderr
    said = up.stdout + up.stderr
    assert no_controls(said), repr(said)
    # the events as they happened and the failure report both name the line, written out
    assert "rank 0: failed · line 3: " in up.stderr and SHOWN in up.stderr, up.stderr
    assert "appeared on rank 0 line 3: " in up.stderr, up.stderr

    logs = cli("logs", r, "--rank", "0")
    assert logs.returncode == 0 and no_controls(logs.stdout), repr(logs.stdout)
    assert "DEMO ignoring 4 flag(s) the demo engine does not implement: --trust-remote-code " \
           f"--chunked-prefill-size --cuda-graph-max-bs-decode {SHOWN}" \
           in logs.stdout, logs.stdout
    grep = cli("logs", r, "--grep", "title")
    assert grep.returncode == 0 and no_controls(grep.stdout), repr(grep.stdout)
    assert sorted(line[:3] for line in grep.stdout.splitlines()) == ["r0 ", "r1 ", "r2 ", "r3 "]  # capture order
    assert all(line.endswith(SHOWN) for line in grep.stdout.splitlines()), grep.stdout
    raw = cli("logs", r, "--rank", "1", "--raw")
    assert raw.returncode == 0 and FLAG.replace("\r", "") in raw.stdout, repr(raw.stdout)

    status = cli("status", r)
    assert status.returncode == 0 and SHOWN in " ".join(status.stdout.split()), status.stdout
    assert no_controls(status.stdout), repr(status.stdout)


def test_logs_follow_shows_escapes_as_text(cli: Cli, env: dict[str, str], tmp_path: Path) -> None:
    """Lines that arrive while ``logs -f`` follows go through the same rule."""
    folder = tmp_path / "recipes" / "escapes-live"
    folder.mkdir(parents=True)
    script = (r"sleep 2; n=0; while :; do n=$((n+1)); "
              r"printf 'tick %s \033]0;title\007\033[2J\r end\n' $n; sleep 0.2; done")
    (folder / "recipe.toml").write_text(
        'engine = "sglang"\ndocker_image = "none:latest"\nmodel = "x/y"\nrequired_nodes = 1\n'
        f'tensor_parallel_size = 1\nentrypoint = ["sh", "-c", {json.dumps(script)}, "sh"]\n'
        '[boot]\ntimeout = "5m"\n')
    up = cli("up", str(folder))
    assert up.returncode == 0, up.stderr
    follow = subprocess.Popen([sys.executable, "-m", "sparktui", "logs", str(folder), "-f"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    lines: list[str] = []
    try:
        assert follow.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum("tick" in x for x in lines) < 15:
            lines.append(follow.stdout.readline())
    finally:
        follow.terminate()
        _, err = follow.communicate(timeout=30)
    ticks = [line for line in lines if " tick " in line]
    assert len(ticks) >= 15, [*lines, err]
    numbers = [int(line.split(" tick ")[1].split()[0]) for line in ticks]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # none lost, none twice
    assert all(line.endswith("\\x1b]0;title\\x07\\x1b[2J end\n") for line in ticks), ticks
    assert no_controls("".join(lines)), repr(lines)
    assert TRACEBACK not in err, err
