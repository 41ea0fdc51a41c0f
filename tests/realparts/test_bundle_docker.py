"""On the real test cluster: ``sparktui bundle`` of a failed run of a recipe with secrets is one
archive the real ``tar`` lists, with every part (the plan, events, every rank's log, the verdicts,
the history, each node's Docker and image facts gathered over SSH), no secret value of the recipe
in any member in any form the redactor knows; and with one node's sshd stopped the bundle is made
all the same, that node's file saying why."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

import sparktui_testbed as tbm
from sparktui.core.bundle import encodings
from tests.runner import secret_demo, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

API_KEY = "sk-bundle-docker-4242"
HF_TOKEN = "hf_bundle_docker_7373"
PARTS = ("README.txt", "summary.txt", "plan.txt", "plan.json", "status.json", "events.jsonl",
         "history.jsonl", "nodes.json", *(f"logs/r{r}.log" for r in range(4)))


def members(archive: Path) -> dict[str, bytes]:
    listed = subprocess.run(["tar", "tzf", str(archive)], capture_output=True, text=True,
                            check=True).stdout.split()
    with tarfile.open(archive) as tar:
        assert [i.name for i in tar.getmembers()] == listed
        out = {}
        for info in tar.getmembers():
            f = tar.extractfile(info)
            assert f is not None
            out[info.name.split("/", 1)[1]] = f.read()
    return out


def no_secret(found: dict[str, bytes]) -> None:
    for name, data in found.items():
        for value in (API_KEY, HF_TOKEN):
            for form in (value, *encodings(value)):
                assert form.encode() not in data, f"{form!r} in {name}"


def test_bundle_of_a_failed_run_on_four_nodes(testbed: Any, tmp_path: Path) -> None:
    recipe = secret_demo(tmp_path / "recipes", api_key=API_KEY, hf_token=HF_TOKEN,
                         extra_env='SPARKTUI_DEMO_FAIL_RANK = "2"\n')
    state = tmp_path / "state"
    cli = sparktui_cli(testbed.cluster_file, state_env(state), recipe)
    try:
        up = cli("up", "--wait")
        assert up.returncode == 1, up.stdout + up.stderr
        (run,) = (state / "sparktui" / "runs").iterdir()
        archive = tmp_path / "bundle.tar.gz"
        made = cli("bundle", "--output", str(archive))
        assert made.returncode == 0, made.stdout + made.stderr
        assert f"bundle: {archive} (" in made.stdout
        found = members(archive)
        assert set(PARTS) <= set(found), sorted(found)
        nodes = [n for n in found if n.startswith("nodes/") and n.endswith(".txt")]
        assert len(nodes) == 4
        for name in nodes:
            text = found[name].decode()
            assert "passed  ssh:" in text and "passed  docker: Docker" in text, text
            assert "passed  image: sparktui-demo" in text and "## kernel\nLinux" in text, text
        status = json.loads(found["status.json"])
        assert status["run"] == run.name and len(status["ranks"]) == 4
        assert status["ranks"][2]["state"] == "failed" and status["ranks"][2]["exit_code"] == 3
        assert any(c["state"] == "failed" for c in status["checks"])
        assert b"Traceback" in found["logs/r2.log"]
        assert b"HF_TOKEN" in found["plan.txt"] and b"--api-key ********" in found["plan.txt"]
        no_secret(found)

        tbm.stop_sshd(testbed.state_dir, "node3")
        try:
            gone = tmp_path / "gone.tar.gz"
            made = cli("bundle", "--output", str(gone), "--run", run.name)
        finally:
            tbm.start_sshd(testbed.state_dir, "node3")
        assert made.returncode == 0, made.stdout + made.stderr
        assert "node node3: the node did not answer" in made.stderr, made.stderr
        found = members(gone)
        assert set(PARTS) <= set(found)
        assert b"the node did not answer" in found["nodes/node3.txt"]
        assert b"passed  docker: Docker" in found["nodes/node0.txt"]
        no_secret(found)
    finally:
        cli("down")
