"""On the real 4-node test cluster, a demo rank in its container prints an OSC title sequence
(``ESC ]0;title BEL``) and a CSI clear-screen: ``sparktui logs`` and the failure report of
``up --wait`` show them as text (``\\x1b``), ``logs --raw`` writes them as they came."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RECIPES, ROOT

pytestmark = pytest.mark.realparts

FLAG = "--x\x1b]0;title\x07\x1b[2Jend"  # the demo logs the names of the flags it ignores
SHOWN = "--x\\x1b]0;title\\x07\\x1b[2Jend"
TRACEBACK = "Traceback (most recent call last):\n  File"


def test_logs_show_a_containers_escapes_as_text(testbed: Any, tmp_path: Path) -> None:
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    text = text.replace('    "--demo-boot-seconds", "2",\n',
                        f'    "--demo-boot-seconds", "2",\n    {json.dumps(FLAG)},\n')
    text = text.replace('must_not_show = ["Traceback (most recent call last):"]',
                        'must_not_show = ["Traceback (most recent call last):", "re:0;title"]')
    folder = tmp_path / "demo-escapes"
    folder.mkdir()
    (folder / "recipe.toml").write_text(text)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": "400",
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("SPARKTUI_CLUSTER", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "sparktui", args[0], str(folder), "--cluster",
                               testbed.cluster_file, *args[1:]], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=180)
        assert TRACEBACK not in proc.stderr, proc.stderr
        return proc

    try:
        up = cli("up", "--wait")  # the escapes are a fatal line here: every rank fails on them
        assert up.returncode == 1, up.stdout + up.stderr
        assert "\x1b" not in up.stderr + up.stdout and "\x07" not in up.stderr + up.stdout
        assert "rank 0 (node0): failed line 3: " in up.stderr and SHOWN in up.stderr, up.stderr
        for rank in range(4):
            logs = cli("logs", "--rank", str(rank))
            assert logs.returncode == 0
            assert "\x1b" not in logs.stdout and "\x07" not in logs.stdout, repr(logs.stdout)
            [line] = [x for x in logs.stdout.splitlines() if "DEMO ignoring" in x]
            assert line.startswith(f"r{rank} ") and line.endswith(SHOWN), line
        raw = cli("logs", "--rank", "2", "--raw")
        assert FLAG in raw.stdout, repr(raw.stdout)
    finally:
        cli("down")
