"""The image on every node, on the real 4-node test cluster: ``up`` refuses while the demo image
is missing on one node and another build sits under its tag on another, and names both;
``image sync`` copies it to exactly those two, in parallel; then ``up --wait`` comes up. A sync
killed mid-way (SIGKILL) leaves nothing tagged or half-loaded on its targets, and the next one
completes. The console's doctor offers the sync.

Every test puts the cluster's images back in its teardown (``tbm.up`` reloads the demo image
where it is missing or differs): the other real-parts tests need it on every node.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.doctor_screen import DoctorScreen
from tests.conftest import RECIPES, ROOT
from tests.realparts.conftest import tbm
from tests.runner import Cli, sparktui_cli, state_env
from tests.ui.conftest import wait_for

pytestmark = pytest.mark.realparts

DEMO = RECIPES / "demo-tp4"
IMAGE = tbm.IMAGE
BIG = "sparktui-synctest-big:latest"



def engine(node: Any) -> docker.DockerClient:
    return docker.DockerClient(base_url=f"unix://{node.docker_socket}", timeout=300)


def image_id(node: Any, image: str = IMAGE) -> str | None:
    try:
        return str(engine(node).images.get(image).id)
    except docker.errors.ImageNotFound:
        return None


def build(node: Any, tag: str, dockerfile: str, files: dict[str, int], folder: Path) -> str:
    """``docker build`` on the node (no network); ``files``: name -> random bytes to add."""
    context = folder / "context.tar"
    with tarfile.open(context, "w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for name, size in files.items():
            path = folder / name
            with open(path, "wb") as f:
                for _ in range(size >> 20):
                    f.write(os.urandom(1 << 20))
            tar.add(path, arcname=name)
            path.unlink()
    with open(context, "rb") as f:
        image, _ = engine(node).images.build(fileobj=f, custom_context=True, tag=tag,
                                             network_mode="none", rm=True)
    context.unlink()
    return str(image.id)


@pytest.fixture
def restore(testbed: Any) -> Iterator[list[str]]:
    """Afterwards every node holds the demo image again; images the test made (ids appended to
    the list it yields, and ``BIG``) are removed from every node."""
    made: list[str] = []
    yield made
    tb = tbm.up(len(testbed.nodes))  # reloads the demo image where it is missing or differs
    for node in tb.nodes:
        client = engine(node)
        for ref in [BIG, *made]:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(ref, force=True)
    assert [image_id(n) for n in tb.nodes] == [tb.image_id] * len(tb.nodes)


@pytest.fixture
def cli(testbed: Any, tmp_path: Path) -> Iterator[Cli]:
    env = state_env(tmp_path / "state")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    run = sparktui_cli(testbed.cluster_file, env, DEMO, timeout=300)
    yield run
    run("down")


def containers(testbed: Any) -> list[Any]:
    return [c for node in testbed.nodes
            for c in engine(node).containers.list(all=True, filters={"label": "sparktui.recipe=demo-tp4"})]


def test_up_refuses_then_sync_copies_to_exactly_those_nodes(testbed: Any, restore: list[str],
                                                            cli: Cli, tmp_path: Path) -> None:
    nodes = testbed.nodes
    good = image_id(nodes[0])
    assert good is not None and all(image_id(n) == good for n in nodes)
    engine(nodes[2]).images.remove(IMAGE, force=True)
    other = build(nodes[3], IMAGE, f"FROM {IMAGE}\nLABEL org.sparktui.test=another-build\n", {},
                  tmp_path)
    restore.append(other)
    assert image_id(nodes[2]) is None and image_id(nodes[3]) == other != good

    up = cli("up", "--wait")
    assert up.returncode == 1, up.stderr
    refusal = next(line for line in up.stderr.splitlines() if line.startswith("error:"))
    assert f"image {IMAGE} is not on node2; another build on node3 {other[7:19]} (node0 has " \
           f"{good[7:19]}); nothing was started" in refusal, refusal
    assert "node1" not in refusal
    assert refusal.endswith("sparktui image sync demo-tp4")
    assert containers(testbed) == []

    # without the check, the rank whose node lacks the image says so (not "engine unreachable")
    forced = cli("up", "--no-image-check")
    assert forced.returncode == 1
    assert (f"image {IMAGE} is not on node node2; run sparktui image sync demo-tp4"
            in forced.stderr), forced.stderr
    assert "unreachable" not in forced.stderr
    assert cli("down").returncode == 0

    sync = cli("image", "sync")
    assert sync.returncode == 0, sync.stderr + sync.stdout
    assert re.search(r"^= node0: the source", sync.stdout, re.M), sync.stdout
    assert re.search(r"^= node1: already has it", sync.stdout, re.M), sync.stdout
    assert re.search(r"^✓ node2: copied", sync.stdout, re.M), sync.stdout
    assert re.search(r"^✓ node3: copied", sync.stdout, re.M), sync.stdout
    assert f"every node has {IMAGE} {good[7:19]}" in sync.stdout
    progress = [line.split(":")[0] for line in sync.stderr.splitlines() if ": copying ~" in line]
    assert sorted(progress) == ["node2", "node3"], sync.stderr  # one save stream, both at once
    assert [image_id(n) for n in nodes] == [good] * 4
    assert image_id(nodes[3], other) == other  # the other build is untagged, not deleted

    again = cli("image", "sync")
    assert again.returncode == 0
    assert "copied" not in again.stdout and "already has it" in again.stdout

    up = cli("up", "--wait")
    assert up.returncode == 0, up.stderr
    assert "ready: 4 ranks" in up.stdout
    assert cli("down").returncode == 0


def test_killed_sync_leaves_nothing_and_the_next_completes(testbed: Any, restore: list[str],
                                                          cli: Cli, tmp_path: Path) -> None:
    nodes = testbed.nodes
    want = build(nodes[0], BIG, f"FROM {IMAGE}\nCOPY big.bin /opt/big.bin\n", {"big.bin": 384 << 20},
                 tmp_path)
    recipe = tmp_path / "big-image" / "recipe.toml"
    recipe.parent.mkdir()
    recipe.write_text((DEMO / "recipe.toml").read_text().replace(f'"{IMAGE}"', f'"{BIG}"'))
    before = {n.name: {i.id for i in engine(n).images.list(all=True)} for n in nodes[1:]}
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "image", "sync", str(recipe.parent),
                             "--cluster", testbed.cluster_file], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    try:
        for line in proc.stderr:  # a line per node every 2 s while it sends
            seen.append(line)
            got = re.search(r"^node\d: sending ([\d.]+) MiB of", line)
            if got and 0 < float(got.group(1)) < 300:
                break
        else:
            pytest.fail(f"no progress line before the sync ended: {''.join(seen)}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    def clean() -> bool:
        return all(image_id(n, BIG) is None and {i.id for i in engine(n).images.list(all=True)}
                   == before[n.name] for n in nodes[1:])
    # the targets' engines notice the cut upload as their SSH channels close
    for _ in range(50):
        if clean():
            break
        subprocess.run(["sleep", "0.2"], check=True)
    for n in nodes[1:]:
        assert image_id(n, BIG) is None, f"{n.name} has {BIG} after a killed sync"
        assert {i.id for i in engine(n).images.list(all=True)} == before[n.name], n.name

    sync = cli("image", "sync", recipe=recipe.parent)
    assert sync.returncode == 0, sync.stderr + sync.stdout
    for name in ("node1", "node2", "node3"):
        assert re.search(rf"^✓ {name}: copied", sync.stdout, re.M), sync.stdout
    assert [image_id(n, BIG) for n in nodes] == [want] * 4


async def test_doctor_offers_the_sync(testbed: Any, restore: list[str]) -> None:
    nodes = testbed.nodes
    good = image_id(nodes[0])
    engine(nodes[3]).images.remove(IMAGE, force=True)
    options = ConsoleOptions([RECIPES], Path(testbed.cluster_file), state_root=state_dir(),
                             recipe="demo-tp4", remember=False)
    app = SparkApp(options)
    async with app.run_test(size=(140, 45)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 20, "the recipe to open on the test cluster")
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen) and
                       app.screen.findings is not None, 60, "doctor's findings")
        doctor = app.screen
        assert isinstance(doctor, DoctorScreen)
        assert doctor.image_differs
        assert doctor.query_one("#dialog").border_subtitle == "s sync image · esc close"
        await pilot.press("s")
        await wait_for(pilot, lambda: doctor.syncing or main.busy == "image sync", 5, "the sync to start")
        await wait_for(pilot, lambda: not doctor.syncing and doctor.findings is not None and
                       not doctor.image_differs and any(
                           f.check == "same image" and f.verdict == "passed" for f in doctor.findings),
                       120, "the sync and a second doctor")
        assert "node3: done" in str(doctor.query_one("#doctor-sync").render())
        assert doctor.query_one("#dialog").border_subtitle == "esc close"
    assert [image_id(n) for n in nodes] == [good] * 4
