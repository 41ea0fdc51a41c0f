"""The real test cluster as a session fixture: 4 nodes, each a network namespace with its own
sshd, dockerd and /home (the sparktui_testbed package at the repository root). Skips with a
reason where the machine cannot run it, except under CI=true, where that is a failure.
`tbm` is that package, for the tests that stop, start or rekey a node's sshd."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import sparktui_testbed as tbm
from tests.conftest import ROOT

IMAGE = tbm.IMAGE
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
    default_recipe, default_timeout = recipe, timeout

    def run(*words: str, recipe: Path = default_recipe,
            timeout: float = default_timeout) -> subprocess.CompletedProcess[str]:
        verb = list(words[:2]) if words[0] == "image" else [words[0]]
        argv = [sys.executable, "-m", "sparktui", *verb, str(recipe), "--cluster", cluster_file,
                *words[len(verb):]]
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
        assert TRACEBACK not in proc.stderr, proc.stderr
        return proc

    return run


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but the real test cluster cannot run here: {reason}")
    pytest.skip(f"real test cluster unavailable: {reason}")


@pytest.fixture(scope="session")
def testbed() -> Iterator[Any]:
    problems = tbm.check_host()
    if problems:
        _unavailable("; ".join(problems))
    for mod in ("asyncssh", "docker"):
        try:
            importlib.import_module(mod)
        except ImportError as e:
            _unavailable(f"python package {mod} missing ({e})")
    n = int(os.environ.get("SPARKTUI_TESTBED_NODES", "4"))
    if n < 2:
        pytest.fail("SPARKTUI_TESTBED_NODES must be at least 2 for these tests")
    was_up = tbm.status()["up"]
    tb = tbm.up(n)
    yield tb
    # under pytest-xdist other workers may still use it: leave it up
    if (
        not was_up
        and os.environ.get("SPARKTUI_TESTBED_KEEP") != "1"
        and "PYTEST_XDIST_WORKER" not in os.environ
    ):
        tbm.down(tb.state_dir)


