"""The real test cluster as a session fixture: 4 nodes, each a network namespace with its own
sshd, dockerd and /home (scripts/testbed.py). Skips with a reason where the machine cannot run
it, except under CI=true, where that is a failure."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "sparktui-demo:latest"


def _load_testbed_module() -> ModuleType:
    name = "sparktui_testbed_script"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "testbed.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


tbm = _load_testbed_module()


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


