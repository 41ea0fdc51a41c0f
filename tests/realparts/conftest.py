"""The real test cluster as a session fixture: 4 nodes, each a network namespace with its own
sshd, dockerd, /home and slurmd, and a Slurm login node (``testbed.slurm``: slurmctld, its own
sshd; the sparktui_testbed package at the repository root). Skips with a
reason where the machine cannot run it, except under CI=true, where that is a failure.
`tbm` is that package, for the tests that stop, start or rekey a node's sshd."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

import sparktui_testbed as tbm

IMAGE = tbm.IMAGE

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


