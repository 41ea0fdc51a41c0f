"""The console in a real terminal: ``sparktui`` under tmux at 120x40 on the local cluster, walked
through as an operator does it: the open recipe chosen again from the palette, ``u``, ``g``,
``/`` with a pattern, ``r`` then rank only, ``x`` + ``y``, ``q``. The terminal never shows a
traceback, the process exits 0, and no rank process is left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

SESSION = "sparktui-walkthrough"
SIZE = (120, 40)
MODULES = (b"sparktui", b"sparktui.agents.local_shim", b"sparktui.demo.engine")


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SESSION, *args], capture_output=True, text=True,
                          timeout=30, check=True).stdout


def _screen() -> str:
    return _tmux("capture-pane", "-p", "-t", SESSION)


def _keys(*keys: str) -> None:
    for key in keys:
        _tmux("send-keys", "-t", SESSION, key)
        time.sleep(0.15)


def _type(text: str) -> None:
    _tmux("send-keys", "-t", SESSION, "-l", text)
    time.sleep(0.2)


def _until(what: Callable[[], bool], timeout: float, why: str) -> None:
    end = time.monotonic() + timeout
    while not what():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {why}; screen:\n{_screen()}")
        time.sleep(0.2)


def _left(env: dict[str, str]) -> list[str]:
    """This walk-through's processes still alive: the console, the local shims and the demo
    engines (known by the state folder in their environment: other runs on the machine are not
    this test's)."""
    mine = f"XDG_STATE_HOME={env['XDG_STATE_HOME']}".encode()
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        module = cmd[cmd.index(b"-m") + 1] if b"-m" in cmd[:-1] else b""
        if module in MODULES and mine in environ:
            alive.append(b" ".join(cmd).decode(errors="replace"))
    return alive


@pytest.fixture
def console(tmp_path: Path) -> Iterator[dict[str, str]]:
    if shutil.which("tmux") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but tmux is not installed")
        pytest.skip("tmux not installed")
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "TERM": "xterm-256color"}
    for var in ("SPARKTUI_CLUSTER", "TMUX"):
        env.pop(var, None)
    command = f"{sys.executable} -m sparktui; echo sparktui-exited=$?; sleep 600"
    subprocess.run(["tmux", "-L", SESSION, "kill-server"], capture_output=True)
    subprocess.run(["tmux", "-L", SESSION, "-f", "/dev/null", "new-session", "-d", "-s", SESSION,
                    "-x", str(SIZE[0]), "-y", str(SIZE[1]), "-c", str(ROOT), command],
                   env=env, check=True, timeout=30)
    try:
        yield env
    finally:
        subprocess.run(["tmux", "-L", SESSION, "kill-server"], capture_output=True)
        subprocess.run([sys.executable, "-m", "sparktui", "down", "demo-tp4"], cwd=ROOT, env=env,
                       capture_output=True, timeout=120)


def _ranks(env: dict[str, str]) -> list[dict[str, object]]:
    out = subprocess.run([sys.executable, "-m", "sparktui", "status", "demo-tp4", "--json"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    ranks: list[dict[str, object]] = json.loads(out.stdout)["ranks"]
    return ranks


def _status(env: dict[str, str]) -> list[object]:
    return [r["state"] for r in _ranks(env)]


def test_walkthrough_under_tmux(console: dict[str, str]) -> None:
    size = _tmux("display", "-p", "-t", SESSION, "#{window_width}x#{window_height}").strip()
    assert size == f"{SIZE[0]}x{SIZE[1]}"
    _until(lambda: "demo-tp4" in _screen() and "r0" in _screen(), 30, "the console on demo-tp4")
    _keys("C-p")
    # "Recipe" alone is on screen already (the Recipes panel): wait for the palette's own prompt
    _until(lambda: "Search for commands" in _screen(), 10, "the command palette")
    _type("Recipe: demo-tp4")
    time.sleep(0.8)  # the palette searches in a worker
    _keys("Enter")
    # a key sent while the palette is still closing goes to the palette, not the console
    _until(lambda: "Recipe: demo-tp4" not in _screen() and "r0" in _screen(), 10, "the console again")
    _keys("u")
    _until(lambda: _status(console) == ["ready"] * 4, 60, "every rank ready")
    running = _left(console)
    assert sum("demo.engine" in p for p in running) >= 4 and any(p.endswith("-m sparktui") for p in running)
    _keys("g")  # side by side
    _keys("/")
    # keys typed before the grep input has the focus are the console's own ('r' is restart)
    _until(lambda: "a leading ! keeps" in _screen(), 10, "the grep input")
    _type("ready|tick")
    _keys("Enter")
    _until(lambda: "a leading ! keeps" not in _screen() and "ready|tick" in _screen(), 10,
           "the grep kept")
    time.sleep(0.5)
    _keys("r")
    _until(lambda: "only (r)" in _screen(), 10, "the restart dialog")
    _keys("r")

    # rank 0 alone gets a new container; as in a real TP group, its peers then fail (the console
    # says so and offers the group): the walk-through goes on to take everything down
    _until(lambda: _ranks(console)[0]["restarts"] == 1, 60, "rank 0 restarted")
    assert [r["restarts"] for r in _ranks(console)] == [1, 0, 0, 0]  # rank only
    _keys("x")
    _until(lambda: "y" in _screen() and "down" in _screen().lower(), 10, "the down dialog")
    _keys("y")
    _until(lambda: not [p for p in _left(console) if "demo.engine" in p], 60, "every rank gone")
    _keys("q")
    _until(lambda: "sparktui-exited=" in _screen(), 30, "the console to exit")
    screen = _tmux("capture-pane", "-p", "-S", "-", "-t", SESSION)
    assert "sparktui-exited=0" in screen, screen
    assert "Traceback" not in screen, screen
    assert not _left(console)  # console, shims and engines: all gone
    assert all(s not in ("ready", "booting", "starting", "running") for s in _status(console))
