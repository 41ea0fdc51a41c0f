"""A launch with secrets in args and env, on the local cluster with real demo ranks: the run's
plan.json and events.jsonl never hold them, and the local runtime's file that holds each rank's
environment is readable by its owner only (fixed ports: run it in a private network namespace)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import RECIPES, ROOT

DEMO = RECIPES / "demo-tp4" / "recipe.toml"
SECRETS = ["sk-live-31337", "auth-value-55", "dbpass-value-66"]


def test_a_run_keeps_its_secrets_to_itself(tmp_path: Path) -> None:
    text = DEMO.read_text().replace(
        '    "--demo-boot-seconds", "2",\n',
        '    "--demo-boot-seconds", "1",\n    "--api-key", "sk-live-31337",\n').replace(
        'SPARKTUI_DEMO_TICK = "1"\n',
        'SPARKTUI_DEMO_TICK = "1"\nAUTH = "auth-value-55"\nDB_PASS = "dbpass-value-66"\n')
    folder = tmp_path / "demo-secrets"
    folder.mkdir()
    (folder / "recipe.toml").write_text(text)
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HF_HOME": str(tmp_path / "hf")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sparktui", *args, str(folder)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)

    try:
        up = cli("up", "--wait")
        assert up.returncode == 0, up.stdout + up.stderr
        for proc in (up, cli("plan"), cli("plan", "--json"), cli("status"), cli("status", "--json")):
            assert not [s for s in SECRETS if s in proc.stdout + proc.stderr], proc.args
        (run,) = (state / "sparktui" / "runs").iterdir()
        for name in ("plan.json", "events.jsonl"):
            written = (run / name).read_text()
            assert not [s for s in SECRETS if s in written], name
        assert "--api-key" in (run / "plan.json").read_text()
        metas = sorted((state / "sparktui" / "local").glob("local-*/meta.json"))
        assert len(metas) == 4
        for meta in metas:
            assert "sk-live-31337" in meta.read_text()  # the rank needs it: readable by its owner only
            assert stat.S_IMODE(meta.stat().st_mode) == 0o600, meta
            assert stat.S_IMODE(meta.parent.stat().st_mode) == 0o700, meta.parent
        key = state / "sparktui" / "keys" / "local.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    finally:
        cli("down")
