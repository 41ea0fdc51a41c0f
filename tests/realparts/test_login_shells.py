"""Nodes whose user logs in to fish, tcsh or zsh (sshd runs every command through it): stage,
up, doctor, telemetry and logs work as on bash, and hostile staging folders, HF caches, models
and NIC names are refused by validation or, sent anyway in a plan built by hand, run no payload
on any node."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.backend.doctor import doctor
from sparktui.backend.orchestrator import Orchestrator
from sparktui.backend.telemetry import Sampler
from sparktui.core.cluster import Cluster, load_cluster
from sparktui.core.lints import errors, lint
from sparktui.core.plan import Plan, build_plan
from sparktui.core.recipe import load_recipe, load_recipe_text
from tests.conftest import IN_CI, ROOT
from tests.realparts.conftest import tbm
from tests.runner import sparktui_cli, state_env
from tests.shellwords import payloads
from tests.staging.ckpt import make_checkpoint

pytestmark = pytest.mark.realparts

DEMO = ROOT / "recipes" / "demo-tp4" / "recipe.toml"
LOGIN_SHELLS = {"node1": "/usr/bin/fish", "node2": "/usr/bin/tcsh", "node3": "/usr/bin/zsh"}
"""node0 keeps the machine's bash."""


@pytest.fixture(scope="module")
def shells(testbed: Any) -> Iterator[dict[str, str]]:
    """root logs in to fish, tcsh and zsh on three nodes for this module, bash again after."""
    missing = [shell for shell in LOGIN_SHELLS.values() if not Path(shell).is_file()]
    if missing:
        (pytest.fail if IN_CI else pytest.skip)(f"not installed: {', '.join(missing)} "
                                                "(./dev test installs them)")
    try:
        for node, shell in LOGIN_SHELLS.items():
            tbm.login_shell(testbed.state_dir, node, shell)
        yield LOGIN_SHELLS
    finally:
        for node in LOGIN_SHELLS:
            tbm.login_shell(testbed.state_dir, node, None)


def staged_recipe(folder: Path, src: str, dst: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    job = (f'[[staging]]\nkind = "sparse-rows"\nid = "engram"\nsrc = "{src}"\ndst = "{dst}"\n'
           'min_free = "1M"\n\n')
    (folder / "recipe.toml").write_text(DEMO.read_text().replace("[boot]", job + "[boot]"))
    return folder


def test_the_login_shells_are_in_place(testbed: Any, shells: dict[str, str]) -> None:
    """What the other tests rely on: each node runs its commands through its own shell."""
    cluster = load_cluster(Path(testbed.cluster_file))

    async def login_shells() -> dict[str, str]:
        orch = Orchestrator(load_recipe(DEMO), cluster, build_plan(load_recipe(DEMO), cluster),
                            state_root=Path("/nonexistent"))
        try:  # the entry sshd reads when a connection logs in
            return {name: (await t.run(["getent", "passwd", "root"])).stdout.strip().split(":")[-1]
                    for name, t in orch.shells.items()}
        finally:
            await orch.close()

    assert asyncio.run(login_shells()) == {"node0": "/bin/bash", **shells}


def test_stage_up_doctor_telemetry_and_logs_work(testbed: Any, shells: dict[str, str],
                                                 tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    homes = [Path(n.home) for n in testbed.nodes]
    ckpts = [make_checkpoint(home / f"shells-{tag}" / "hf") for home in homes]
    src = "/home/" + str(ckpts[0].snapshot.relative_to(homes[0]))
    dst = f"/home/shells-{tag}/stage dir/engram"  # a space: quoted through every shell
    folder = staged_recipe(tmp_path / "demo-shells", src, dst)
    cli = sparktui_cli(testbed.cluster_file, state_env(tmp_path / "state"), folder)
    try:
        stage = cli("stage")
        assert stage.returncode == 0, stage.stdout + stage.stderr
        for index, home in enumerate(homes):
            packed = home / f"shells-{tag}" / "stage dir" / "engram" / f"engram-l1-r{index}of4.bin"
            assert packed.read_bytes() == ckpts[index].expected(1, index, 4)
        up = cli("up", "--wait")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "ready: 4 ranks, 15/15 checks passed" in up.stdout  # 11 of the recipe, an args check a rank
        found = json.loads(cli("doctor", "--json").stdout)
        failed = [f for f in found if f["verdict"] == "failed"]
        assert failed == []
        # the fit's listing ran under each node's shell: it found no snapshot of the demo model
        fits = {f["node"]: f["sentence"] for f in found if f["check"] == "memory fit"}
        assert fits == dict.fromkeys(["node0", "node1", "node2", "node3"], (
            "cannot tell whether it fits: no snapshot found (/home/hf/hub/models--sparktui--demo-"
            "model/snapshots: No such file or directory); the engine may download the model, "
            "whose size is not known here")), fits
        staging = {f["node"]: f["sentence"] for f in found if f["check"] == "staging engram"}
        assert sorted(staging) == ["node0", "node1", "node2", "node3"]
        assert all(s.startswith(f"{dst} writable, ") for s in staging.values()), staging
        logs = cli("logs", "--grep", "rendezvous ok")
        assert logs.returncode == 0, logs.stderr
        for rank in range(4):
            assert re.search(rf"^r{rank} .*DEMO rendezvous ok: world=4 rank={rank}", logs.stdout, re.M)
        samples = asyncio.run(telemetry(testbed, folder / "recipe.toml"))
        assert {name: status for name, (status, _) in samples.items()} == dict.fromkeys(
            ["node0", "node1", "node2", "node3"], "ok")
        assert all(paths == [dst, "/home/hf"] for _, paths in samples.values()), samples
    finally:
        cli("down")
        for home in homes:
            shutil.rmtree(home / f"shells-{tag}", ignore_errors=True)


async def telemetry(testbed: Any, recipe_path: Path) -> dict[str, tuple[str, list[str]]]:
    """Each node's status and watched paths from the console's sampling loop (one long-lived
    command per node), once every node has sent a sample."""
    recipe = load_recipe(recipe_path)
    cluster = load_cluster(Path(testbed.cluster_file))
    orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=recipe_path.parent)
    sampler = orch.telemetry(interval=0.5)
    try:
        await orch.connect()
        sampler.start()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (
                len(sampler.latest) == 4 and all(t.status == "ok" for t in sampler.latest.values())):
            await asyncio.sleep(0.1)
        return {name: (t.status, [d.path for d in t.sample.disks] if t.sample else [])
                for name, t in sampler.latest.items()}
    finally:
        await sampler.stop()
        await orch.close()


def test_validate_names_a_hostile_dst_and_its_line(testbed: Any, tmp_path: Path) -> None:
    dst = "/srv/stage\\\\'$(touch /tmp/p)\\\\'\\\\'"  # the issue's, as a TOML basic string
    folder = staged_recipe(tmp_path / "demo-hostile", "/home/hf", dst)
    res = sparktui_cli(testbed.cluster_file, state_env(tmp_path / "state"), folder)("validate")
    assert res.returncode == 1
    said = " ".join(res.stderr.split())
    line = next(i for i, t in enumerate((folder / "recipe.toml").read_text().splitlines(), 1)
                if t.startswith("dst = "))
    assert (f"recipe.toml:{line}:1: error: staging[0].dst: \"/srv/stage\\\\'$(touch /tmp/p)\\\\'\\\\'\" "
            "holds '\\\\', which sparktui never sends to a node") in said, said


def hostile_plan(plan: Plan, cluster: Cluster, words: list[str]) -> Plan:
    """``plan`` with one staging job per word on every node: built by hand, as validation
    refuses nearly all of them."""
    job = plan.staging[0]
    jobs = [dataclasses.replace(job, node=n.name, dst=w, id=f"e{i}")
            for n in cluster.nodes for i, w in enumerate(words)]
    return dataclasses.replace(plan, staging=jobs)


def with_values(plan: Plan, cluster: Cluster, word: str) -> tuple[Plan, list[Any]]:
    """``plan`` and the nodes with ``word`` as the model, every node's hf_cache and the NIC
    NCCL is told to use."""
    ranks = [dataclasses.replace(r, container=dataclasses.replace(
        r.container, env={**r.container.env, "NCCL_SOCKET_IFNAME": word})) for r in plan.ranks]
    nodes = [dataclasses.replace(n, hf_cache=word) for n in cluster.nodes]
    return dataclasses.replace(plan, model=word, ranks=ranks), nodes


async def test_hostile_values_run_no_payload_on_any_node(testbed: Any, shells: dict[str, str],
                                                        tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    marker = f"/home/pwned-{tag}"  # each node's own /home: looked for on every node
    base = f"/home/hostile-{tag}"
    words = [w.replace("/srv", base, 1) for w in payloads(marker)]
    homes = [Path(n.home) for n in testbed.nodes]
    cluster = load_cluster(Path(testbed.cluster_file))
    folder = staged_recipe(tmp_path / "demo-hostile", "/home/hf/x", "/home/hf/y")
    recipe = load_recipe(folder / "recipe.toml")
    plan = build_plan(recipe, cluster)

    # validation: each word as dst, refused with its key, or (if no shell would see code in it)
    # passed on to the run below all the same
    text = (folder / "recipe.toml").read_text()
    refused = 0
    for word in words:
        variant = load_recipe_text(text.replace('dst = "/home/hf/y"', f"dst = {json.dumps(word)}"),
                                   folder / "recipe.toml")
        keys = {p.key for p in errors(lint(variant, cluster))}
        refused += keys == {"staging[0].dst"}
        assert keys <= {"staging[0].dst"}
    assert refused >= len(words) - 2  # all but a plain "-c ..." and the legitimate folder

    events: list[Any] = []
    staged = hostile_plan(plan, cluster, words)
    orch = Orchestrator(recipe, cluster, staged, state_root=tmp_path / "state", on_event=events.append)
    try:
        await orch.connect()
        found = await doctor(staged, list(cluster.nodes), orch.runtime)
        assert {f.node for f in found if f.check.startswith("staging ")} == {
            "node0", "node1", "node2", "node3"}
        sampler = Sampler(staged, list(cluster.nodes), orch.shells, events.append)
        for node in cluster.nodes:
            assert (await sampler.sample(node)).status == "ok"

        await orch.stage()  # the agent gets each dst in its job (JSON in its argv)

        async def values(word: str) -> None:
            hostile, nodes = with_values(plan, cluster, word)
            await doctor(hostile, nodes, orch.runtime)
            sampler = Sampler(hostile, nodes, orch.shells, events.append)
            await asyncio.gather(*(sampler.sample(node) for node in nodes))

        for i in range(0, len(words), 8):  # a few at once: each is a dozen commands a node
            await asyncio.gather(*(values(w) for w in words[i:i + 8]))
        await asyncio.sleep(0.5)  # a payload started in the background has had its time
        assert [str(h) for h in homes if (h / f"pwned-{tag}").exists()] == []
    finally:
        await orch.close()
        for home in homes:
            shutil.rmtree(home / f"hostile-{tag}", ignore_errors=True)
            (home / f"pwned-{tag}").unlink(missing_ok=True)
