"""Nothing but sparktui's own words on stderr: the libraries a command imports print no
warning there (cryptography 51's DSA deprecation, raised as asyncssh imports, once put five
lines in front of every command's one-line error)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_importing_every_backend_library_prints_nothing() -> None:
    code = ("import sparktui.cli.ops, sparktui.backend.runtimes.ssh, "
            "sparktui.backend.runtimes.docker, sparktui.ui.app")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "default"})
    assert res.returncode == 0 and res.stderr == "", res.stderr
