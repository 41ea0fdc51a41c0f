"""Two ``extra_mounts`` of one host folder reach the container both: the binds were a dict keyed
by the host path, so the second replaced the first (the container saw only ``/b``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.realparts.conftest import IMAGE
from tests.runner import sparktui_cli, state_env

pytestmark = pytest.mark.realparts


def test_two_mounts_of_one_host_folder_are_both_made(testbed: Any, tmp_path: Path) -> None:
    folder = tmp_path / f"two-binds-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    (folder / "recipe.toml").write_text(
        f'engine = "sglang"\ndocker_image = "{IMAGE}"\nmodel = "x/binds"\nrequired_nodes = 1\n'
        'tensor_parallel_size = 1\nentrypoint = ["sleep", "600"]\n'
        '[[extra_mounts]]\nhost = "/home"\ncontainer = "/a"\n'
        '[[extra_mounts]]\nhost = "/home"\ncontainer = "/b"\nread_only = true\n')
    cli = sparktui_cli(testbed.cluster_file, state_env(tmp_path / "state"), folder)
    node0 = docker.DockerClient(base_url=f"unix://{testbed.nodes[0].docker_socket}")
    try:
        up = cli("up")
        assert up.returncode == 0, up.stderr
        mounts = node0.containers.get(f"sparktui-{folder.name}-r0").attrs["Mounts"]
        made = sorted((m["Source"], m["Destination"], m["RW"]) for m in mounts)
        assert made == [("/home", "/a", True), ("/home", "/b", False),
                        ("/home/hf", "/root/.cache/huggingface", True)]
    finally:
        cli("down")
