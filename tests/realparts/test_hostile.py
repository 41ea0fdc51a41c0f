"""Hostile input on the real test cluster: a container label planted on a node, a symbolic link
at a packed file's path, ``~`` in staging paths, watched paths that are relative, ``~`` or an
option, and a cluster file without ``ssh.user``. Nothing crashes, hangs, survives its loop or
writes outside its place."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import pytest

from sparktui.backend.events import Event
from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.staging import agent_argv, agent_input
from sparktui.backend.telemetry import Sampler
from sparktui.core.cluster import load_cluster, load_cluster_text
from sparktui.core.ownership import default_owner
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe, load_recipe_text
from sparktui.core.telemetry import END, INVALID, sample_loop_argv
from tests.conftest import RECIPES, ROOT
from tests.realparts.conftest import IMAGE
from tests.staging.ckpt import make_checkpoint

pytestmark = pytest.mark.realparts

TRACEBACK = "Traceback (most recent call last):\n  File"


def one_node_recipe(tmp_path: Path, staging: str = "") -> Path:
    folder = tmp_path / "hostile-one"
    folder.mkdir(exist_ok=True)
    (folder / "recipe.toml").write_text(
        f'engine = "sglang"\ndocker_image = "{IMAGE}"\nmodel = "deepseek-ai/DeepSeek-V4.1-Flash"\n'
        f"required_nodes = 1\ntensor_parallel_size = 1\n{staging}")
    return folder / "recipe.toml"


def test_a_run_label_that_is_no_run_id_is_ignored(testbed: Any, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    folder = tmp_path / "demo-labels"
    folder.mkdir()
    (folder / "recipe.toml").write_text((RECIPES / "demo-tp4" / "recipe.toml").read_text())
    planted = {0: f"../../x-{tag}", 1: f"/tmp/x-{tag}"}
    clients = {i: docker.DockerClient(base_url=f"unix://{testbed.nodes[i].docker_socket}") for i in planted}
    containers = []
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    try:
        for i, run_id in planted.items():
            containers.append(clients[i].containers.run(
                IMAGE, ["sh", "-c", "echo planted; sleep 600"], name=f"hostile-{tag}-r{i}",
                detach=True, init=True,
                network_mode="none", labels={"sparktui.recipe": "demo-labels", "sparktui.rank": str(i),
                                             "sparktui.world": "4", "sparktui.cluster": "testbed",
                                             # the owner label is as easy to set as any other
                                             "sparktui.owner": default_owner(),
                                             "sparktui.run": run_id}))
        for verb in ("status", "logs"):
            proc = subprocess.run([sys.executable, "-m", "sparktui", verb, str(folder), "--cluster",
                                   testbed.cluster_file], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=120)
            assert TRACEBACK not in proc.stderr, proc.stderr
            assert proc.returncode == 0, proc.stderr
            said = " ".join(proc.stderr.split())
            for i, run_id in planted.items():
                assert (f"warning: container hostile-{tag}-r{i} on node{i} has label "
                        f"sparktui.run={run_id!r}, which is no run id: ignored") in said, said
        # the run found was made where runs live, and nothing anywhere else
        outside = [p for p in state.rglob("*") if not p.is_relative_to(state / "sparktui")]
        assert outside == [], outside
        assert not Path(f"/tmp/x-{tag}").exists() and not (tmp_path / f"x-{tag}").exists()
        runs = list((state / "sparktui" / "runs").iterdir())
        assert len(runs) == 1 and runs[0].name.startswith("demo-labels-")
        assert (runs[0] / "r0.log").exists() and (runs[0] / "cursors.json").exists()
    finally:
        for c in containers:
            c.remove(force=True)


async def test_staging_refuses_a_link_and_never_makes_a_tilde_folder(testbed: Any, tmp_path: Path) -> None:
    home = Path(testbed.nodes[0].home)
    tag = uuid.uuid4().hex[:8]
    ckpt = make_checkpoint(home / f"hf-{tag}")
    src = "/home/" + str(ckpt.snapshot.relative_to(home))
    recipe = load_recipe(one_node_recipe(tmp_path, (
        f'[[staging]]\nkind = "sparse-rows"\nid = "engram"\nsrc = "{src}"\n'
        f'dst = "/home/dst-{tag}"\n')))
    cluster = load_cluster(Path(testbed.cluster_file))
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path / "state")
    (home / f"dst-{tag}").mkdir()
    precious = home / f"precious-{tag}"
    precious.write_bytes(b"keep me")
    (home / f"dst-{tag}" / "engram-l1-r0of1.bin").symlink_to(f"/home/precious-{tag}")
    try:
        (result,) = await orch.stage()
        assert not result.ok
        assert result.error == (f"node0: /home/dst-{tag}/engram-l1-r0of1.bin is a symbolic link; "
                                f"sparktui writes only regular files in /home/dst-{tag}: remove the "
                                "link and stage again (its target was not touched)")
        assert precious.read_bytes() == b"keep me"

        # ~ in dst, on the node itself: expanded there with the node's HOME, or refused
        shell = orch.shells["node0"]
        agent = agent_input()  # started as staging starts it: the same command, the same stdin
        spec = {"src": src, "dst": "~/engram", "id": "engram", "world": 1, "ranks": [0], "node": "node0"}
        cwd = f"/home/cwd-{tag}"
        lines: list[str] = []
        rc = await shell.stream(["sh", "-c", f'mkdir -p {cwd} && cd {cwd} && HOME=/home/home-{tag} '
                                     'exec "$@"', "sh", *agent_argv(spec)], lines.append, stdin=agent)
        assert rc == 0, lines
        assert (home / f"home-{tag}" / "engram" / "engram-l1-r0of1.bin").read_bytes() == \
            ckpt.expected(1, 0, 1)
        # a user with no passwd entry and no HOME (the system python3: root's may be private)
        lines.clear()
        rc = await shell.stream(["sh", "-c", f"cd {cwd} && exec env -u HOME setpriv --reuid=54321 "
                                     '--regid=54321 --clear-groups "$@"', "sh",
                                     *agent_argv(spec, "/usr/bin/python3")], lines.append, stdin=agent)
        assert rc == 1
        assert json.loads([line for line in lines if line.strip()][-1])["message"] == (
            "node0: dst ~/engram: there is no home folder here to expand ~ in; write the full path")
        assert list((home / f"cwd-{tag}").iterdir()) == []  # never a literal "~"
    finally:
        await orch.close()
        for name in (f"hf-{tag}", f"dst-{tag}", f"home-{tag}", f"cwd-{tag}", f"precious-{tag}"):
            path = home / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)


async def test_telemetry_with_bad_paths_ends_and_leaves_nothing_running(testbed: Any, tmp_path: Path) -> None:
    recipe = load_recipe(one_node_recipe(tmp_path))
    cluster = load_cluster(Path(testbed.cluster_file))
    plan = build_plan(recipe, cluster)
    bad = ["relative/dst", "~/dst", "-P"]
    staging = [dataclasses.replace(  # a plan built by hand: validation refuses these paths
        build_plan(load_recipe_text(one_node_recipe(tmp_path, '[[staging]]\nkind = "sparse-rows"\n'
                                                    'id = "e"\nsrc = "/s"\ndst = "/d"\n').read_text(),
                                    tmp_path / "x" / "recipe.toml"), cluster).staging[0], dst=p)
        for p in bad]
    plan = dataclasses.replace(plan, staging=staging)
    events: list[Event] = []
    orch = Orchestrator(recipe, cluster, plan, state_root=tmp_path / "state", on_event=events.append)
    interval = 1.0
    sampler = Sampler(plan, [cluster.nodes[0]], orch.shells, events.append, interval=interval)
    try:
        await orch.connect()
        started = time.monotonic()
        t = await sampler.sample(cluster.nodes[0])
        assert time.monotonic() - started < interval
        assert t.status == "ok" and t.sample is not None
        assert [d.path for d in t.sample.disks] == ["/home/hf"]
        assert [code for code, _ in t.warnings] == [f"invalid-path:{p}" for p in bad]
        assert "relative/dst: not an absolute path on node0" in t.warnings[0][1]

        # the node-side loop itself, given the paths anyway: each sample ends at once
        marker = f"/nonexistent-{uuid.uuid4().hex[:8]}"
        blocks: list[tuple[float, str]] = []
        lines: list[str] = []

        def on_line(line: str) -> None:
            if line == END:
                blocks.append((time.monotonic(), "\n".join(lines)))
                lines.clear()
            else:
                lines.append(line)

        loop = asyncio.create_task(orch.shells["node0"].stream(
            sample_loop_argv([*bad, marker], 0.5), on_line))
        deadline = time.monotonic() + 5
        while len(blocks) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(blocks) >= 3, "the sampling loop did not go round"
        assert blocks[2][0] - blocks[1][0] < 2 * 0.5 + 0.5
        assert blocks[-1][1].count(INVALID) == 3
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        await orch.close()  # the SSH connection goes: the loop's next write ends it
        deadline = time.monotonic() + 5
        while _processes_with(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert _processes_with(marker) == []
    finally:
        await orch.close()


def _processes_with(marker: str) -> list[int]:
    """Pids whose command line holds ``marker`` (the test nodes' processes are this host's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_a_cluster_without_ssh_user_logs_in_as_this_user(testbed: Any, tmp_path: Path) -> None:
    text = Path(testbed.cluster_file).read_text()
    assert 'user = "root"\n' in text
    cluster = load_cluster_text(text.replace('user = "root"\n', ""), tmp_path / "cluster.toml")
    assert cluster.nodes[0].ssh.user is None
    recipe = load_recipe(one_node_recipe(tmp_path))
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path / "state")
    try:
        assert await orch.connect() == {}  # it used to raise TypeError inside asyncssh
        res = await orch.shells["node0"].run(["id", "-un"])
        assert res.stdout.strip() == "root"
    finally:
        await orch.close()
