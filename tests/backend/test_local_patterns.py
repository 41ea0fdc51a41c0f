"""A boot check that backtracks forever in Python's ``re`` cannot hold the local cluster up: the
demo's ranks print lines of ``a`` ending in ``!`` before they boot, the recipe's
``must_not_show`` holds ``re:(a+)+$`` (190 s a line of 32 in ``re``, on the event loop), and
``up --wait`` still ends well within its boot timeout, every check passed; ``down`` works."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.runner import local_env, sparktui_run

BOOT_TIMEOUT_S = 30  # the demo boots in 9-19 s (load 7); Python's re: 190 s a line of 32


def prints(lines: int, size: int) -> str:
    """A shell loop printing ``lines`` lines of ``size`` ``a`` and a ``!``."""
    return f"for n in $(seq {lines}); do printf '%s!\\n' {'a' * size}; done"


def hostile_recipe(folder: Path, script: str, *, check: bool = True) -> Path:
    """demo-tp4 whose ranks run ``script`` before the demo engine, with a boot timeout of
    ``BOOT_TIMEOUT_S`` and (``check``) ``re:(a+)+$`` as a must-not-show line."""
    text = (ROOT / "recipes" / "demo-tp4" / "recipe.toml").read_text()
    entry = 'entrypoint = ["python3", "-m", "sparktui.demo.engine"]'
    assert entry in text and 'timeout = "2m"' in text
    shell = json.dumps(f'{script}; exec python3 -m sparktui.demo.engine "$@"')
    text = text.replace(entry, f'entrypoint = ["sh", "-c", {shell}, "demo"]')
    text = text.replace('timeout = "2m"', f'timeout = "{BOOT_TIMEOUT_S}s"')
    if check:
        text = text.replace('must_not_show = ["Traceback (most recent call last):"]',
                            'must_not_show = ["Traceback (most recent call last):", "re:(a+)+$"]')
    folder.mkdir(parents=True)
    (folder / "recipe.toml").write_text(text)
    return folder


def test_a_backtracking_must_not_show_holds_up_neither_up_nor_down(tmp_path: Path) -> None:
    folder = hostile_recipe(tmp_path / "demo-aaa", f"{prints(40, 32)}; {prints(1, 60)}")
    cli = sparktui_run(local_env(tmp_path))
    try:
        start = time.monotonic()
        try:
            up = cli("up", str(folder), "--wait", timeout=3 * BOOT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"up --wait still running {3 * BOOT_TIMEOUT_S} s on") from None
        took = time.monotonic() - start
        assert up.returncode == 0, up.stderr
        assert took < BOOT_TIMEOUT_S and "ready: 4 ranks" in up.stdout
        status = json.loads(cli("status", str(folder), "--json").stdout)
        assert [r["state"] for r in status["ranks"]] == ["ready"] * 4
        assert all(r["checks"]["failed"] == 0 and r["checks"]["pending"] == 0 for r in status["ranks"])
        logs = cli("logs", str(folder), "--rank", "0", "--grep", "(a+)+!$").stdout.splitlines()
        assert len(logs) == 41 and all(line.startswith("r0 ") for line in logs)
        down = cli("down", str(folder), timeout=30)
        assert down.returncode == 0, down.stderr
        status = json.loads(cli("status", str(folder), "--json").stdout)
        assert all(r["container_id"] is None for r in status["ranks"])
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            cli("down", str(folder), timeout=30)
