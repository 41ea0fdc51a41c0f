"""`sparktui stage` on the local cluster: the operator's recipe with its staging job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SEED
from tests.staging.ckpt import make_checkpoint


def test_stage_seed_recipe_locally(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "hf")
    dst = tmp_path / "mia-state" / "engram"
    folder = tmp_path / "dsv41-flash-4x-mia"
    folder.mkdir()
    text = SEED.read_text().replace('dst = "/home/kilork/mia-state/engram"', f'dst = "{dst}"')
    (folder / "recipe.toml").write_text(text)
    env = {**os.environ, "HF_HOME": str(ckpt.hf), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("SPARKTUI_CLUSTER", None)

    def stage(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sparktui", "stage", str(folder), *extra],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    first = stage("--json")
    assert first.returncode == 0, first.stderr
    results = json.loads(first.stdout)
    assert [r["node"] for r in results] == ["local0", "local1", "local2", "local3"]
    for r, result in enumerate(results):
        assert result["ok"] and {f["status"] for f in result["files"]} == {"packed"}
        assert sorted(f["name"] for f in result["files"]) == [
            f"engram-l1-r{r}of4.bin", f"engram-l14-r{r}of4.bin"]
    for layer in (1, 14):
        for r in range(4):
            assert (dst / f"engram-l{layer}-r{r}of4.bin").read_bytes() == ckpt.expected(layer, r, 4)

    again = stage()
    assert again.returncode == 0
    assert again.stdout.count("2 verified · 0 B written") == 4
    assert stage("--verify-only", "--sample", "all").returncode == 0
    (dst / "engram-l1-r0of4.bin").unlink()
    stale = stage("--verify-only")
    assert stale.returncode == 1
    assert "1 stale, 1 verified" in stale.stdout
