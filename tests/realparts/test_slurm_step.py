"""The Slurm step's supervisor (``agents/slurm_step.py``) on a test node's real Docker engine:
the container's output reaches the log file with Docker's time stamps, both streams; its exit
code is written beside it; a TERM stops the container before the supervisor ends; no variable's
value is on the Docker client's command line."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker

from sparktui.agents import slurm_step
from sparktui.core.dockerview import docker_cli_args
from sparktui.core.rankspec import ContainerSpec

from .conftest import IMAGE

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z ")


def _spec(tmp: Path, node: Any, script: str, env: dict[str, str]) -> tuple[Path, dict[str, Any], str]:
    name = f"sptb-step-{uuid.uuid4().hex[:8]}"
    spec = ContainerSpec(name=name, image=IMAGE, entrypoint=["/bin/sh", "-c"], command=[script],
                         env=env, mounts=[], shm_size=None, gpus="none", devices=[],
                         labels={"sparktui.slurm.job": "4242"})
    argv, environment = docker_cli_args(spec, {"sparktui.rank": "0"})
    base = tmp / "rank0-1"
    data = {"argv": argv, "env": environment, "log": f"{base}.log", "exit": f"{base}.exit",
            "cid": f"{base}.cid", "docker": "docker", "host": f"unix://{node.docker_socket}",
            "stop_timeout": 2}
    path = tmp / "rank0-1.json"
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    return path, data, name


def _start(path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-I", slurm_step.__file__, str(path)])


def test_output_and_exit_code_reach_the_shared_files(testbed: Any, tmp_path: Path) -> None:
    node = testbed.nodes[0]
    script = 'for i in 1 2 3; do echo "out $i"; echo "err $i" >&2; done; echo "key=$API_KEY"; exit 7'
    path, data, name = _spec(tmp_path, node, script, {"API_KEY": "sk-secret-value-123"})
    step = _start(path)
    assert step.wait(timeout=60) == 7
    assert not path.exists()  # the spec (it may hold secrets) is read once, then removed
    lines = Path(data["log"]).read_text().splitlines()
    assert all(STAMP.match(line) for line in lines), lines
    texts = [STAMP.sub("", line) for line in lines]
    assert [t for t in texts if t.startswith("out")] == ["out 1", "out 2", "out 3"]
    assert sorted(t for t in texts if t.startswith("err")) == ["err 1", "err 2", "err 3"]
    assert "key=sk-secret-value-123" in texts  # the value reached the container ...
    exit_ = json.loads(Path(data["exit"]).read_text())
    assert exit_["exit_code"] == 7 and exit_["container_id"] == Path(data["cid"]).read_text().strip()
    client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
    try:
        c = client.containers.get(name)
        assert c.labels["sparktui.slurm.job"] == "4242" and c.labels["sparktui.rank"] == "0"
        # ... by name only: the client's command line carried "-e API_KEY", never the value
        assert "sk-secret-value-123" not in " ".join(data["argv"])
        assert c.attrs["Config"]["Env"].count("API_KEY=sk-secret-value-123") == 1
        c.remove(force=True)
    finally:
        client.close()


def test_term_stops_the_container_first(testbed: Any, tmp_path: Path) -> None:
    node = testbed.nodes[1]
    script = 'trap "echo stopping; exit 143" TERM; echo up; while :; do sleep 0.1; done'
    path, data, name = _spec(tmp_path, node, script, {})
    step = _start(path)
    log = Path(data["log"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "up" not in log.read_text() if log.exists() else True:
        time.sleep(0.1)
    step.send_signal(signal.SIGTERM)
    assert step.wait(timeout=30) == 143
    texts = [STAMP.sub("", line) for line in log.read_text().splitlines()]
    assert texts[-2:] == ["up", "stopping"], texts
    client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
    try:
        c = client.containers.get(name)
        assert c.status == "exited" and c.attrs["State"]["ExitCode"] == 143
        c.remove(force=True)
    finally:
        client.close()
    assert json.loads(Path(data["exit"]).read_text())["exit_code"] == 143


def test_a_container_that_cannot_start_is_said_in_the_log(testbed: Any, tmp_path: Path) -> None:
    node = testbed.nodes[2]
    path, data, _ = _spec(tmp_path, node, "true", {})
    spec = json.loads(path.read_text())
    spec["argv"][spec["argv"].index(IMAGE)] = "sparktui-no-such-image:never"
    path.write_text(json.dumps(spec))
    step = _start(path)
    assert step.wait(timeout=60) == slurm_step.EXIT_SETUP
    lines = Path(data["log"]).read_text().splitlines()
    assert all(STAMP.match(line) for line in lines), lines  # Docker's words, each line stamped
    assert "sparktui step: docker run failed (exit 125)" in lines[0], lines
    assert any("sparktui-no-such-image" in line for line in lines), lines
    assert json.loads(Path(data["exit"]).read_text())["exit_code"] is None
    assert os.stat(data["log"]).st_mode & 0o777 == 0o600
