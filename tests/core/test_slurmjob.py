"""The Slurm kind's pure half: its ``[slurm]`` table is checked like every other key (file,
line, did-you-mean), and the seed's plan on a Slurm cluster shows the job script and each
rank's step, with the plan's own nodes and flags."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from sparktui.core.cluster import load_cluster_text
from sparktui.core.errors import ClusterError
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from sparktui.core.slurmjob import SlurmSettings, allocation_argv, parse_comment, step_argv
from tests.conftest import CLUSTER_SLURM4, SEED

CLUSTER = CLUSTER_SLURM4.read_text()


def _problems(text: str) -> list[tuple[int | None, str | None, str]]:
    with pytest.raises(ClusterError) as err:
        load_cluster_text(text, Path("hpc.toml"))
    return [(p.line, p.key, p.message) for p in err.value.problems]


def test_the_slurm_table_is_read_into_the_clusters_settings() -> None:
    cluster = load_cluster_text(CLUSTER)
    settings = cluster.settings
    assert isinstance(settings, SlurmSettings)
    assert settings.login_host == ("login1", 2222)
    assert settings.shared_dir == "/srv/sparktui" and settings.python == "/usr/bin/python3"
    assert [n.name for n in cluster.nodes] == ["gpu01", "gpu02", "gpu03", "gpu04"]


def test_a_misspelt_or_missing_slurm_key_is_named_with_its_line() -> None:
    assert sorted(_problems(CLUSTER.replace("partition =", "partiton ="))) == [
        (6, "slurm.partition", "missing required key 'partition'"),
        (8, "slurm.partiton", "unknown key 'partiton'; did you mean 'partition'?"),
    ]
    [(line, key, message)] = _problems(CLUSTER.replace('time = "4:00:00"', 'time = "4 hours"'))
    assert (line, key) == (10, "slurm.time") and "no Slurm time limit" in message
    [(line, key, message)] = _problems(CLUSTER.replace('shared_dir = "/srv/sparktui/"',
                                                       'shared_dir = "srv"'))
    assert (line, key) == (12, "slurm.shared_dir") and "absolute path" in message
    without = CLUSTER.split("[slurm]")[0] + "[[nodes]]" + CLUSTER.split("[[nodes]]", 1)[1]
    [(line, key, message)] = _problems(without)
    assert key == "slurm" and message == "missing required key 'slurm'"


def test_a_value_bound_for_the_login_shell_holds_only_safe_characters() -> None:
    [(line, key, message)] = _problems(CLUSTER.replace('"/srv/sparktui/"', '"/srv/$(reboot)"'))
    assert (line, key) == (12, "slurm.shared_dir") and "never sends to a node" in message
    [(line, key, _)] = _problems(CLUSTER.replace('account = "lab"', 'account = "lab;rm"'))
    assert (line, key) == (9, "slurm.account")
    [(line, key, message)] = _problems(CLUSTER.replace('"login1:2222"', '"-oProxyCommand=x"'))
    assert (line, key) == (7, "slurm.login") and "not a host name" in message


def test_another_kind_has_no_slurm_table() -> None:
    ssh = CLUSTER.replace('kind = "slurm"', 'kind = "ssh"')
    [(line, key, message)] = _problems(ssh)
    assert (line, key) == (6, "slurm") and message.startswith("unknown key 'slurm'")


def test_the_seed_plan_shows_the_job_and_each_ranks_step() -> None:
    cluster = load_cluster_text(CLUSTER)
    plan = build_plan(load_recipe(SEED), cluster)
    titles = [t for t, _ in plan.runner]
    assert titles == ["allocation (on the login node login1:2222)",
                      *(f"rank {r} step" for r in range(4))]
    alloc = shlex.split(plan.runner[0][1].replace("\\\n", " "))
    assert alloc[:2] == ["salloc", "--no-shell"]
    for word in ("--job-name=sparktui.dsv41-flash-4x-mia", "--partition=spark", "--account=lab",
                 "--nodes=4", "--nodelist=gpu01,gpu02,gpu03,gpu04", "--ntasks-per-node=1",
                 "--time=4:00:00", "--gres=gpu:1"):
        assert word in alloc, alloc
    assert any(w.startswith("--comment=") and f"plan={plan.plan_hash}" in w for w in alloc)
    # the head's address in every rank's flags is the node table's fabric address
    for r in plan.ranks:
        command = r.container.command
        assert "192.168.200.1:25000" in " ".join(command)
    step2 = shlex.split(plan.runner[3][1].replace("\\\n", " "))
    assert step2[:2] == ["srun", "--jobid=$SLURM_JOB_ID"]
    assert "--nodelist=gpu03" in step2 and "--job-name=rank2" in step2 and "--overlap" in step2
    # the runner is shown, never hashed: a plan hash is the same on any kind's view of it
    assert plan.to_json()["runner"][0]["title"].startswith("allocation")


def test_the_allocation_and_steps_carry_their_values_as_single_words() -> None:
    cluster = load_cluster_text(CLUSTER)
    plan = build_plan(load_recipe(SEED), cluster)
    settings = cluster.settings
    assert isinstance(settings, SlurmSettings)
    argv = allocation_argv(plan.recipe_slug, [r.node for r in plan.ranks], "op@jump",
                           plan.plan_hash, settings, "/srv/sparktui/run one")
    comment = f"sparktui:owner=op@jump,plan={plan.plan_hash},dir=/srv/sparktui/run one"
    assert f"--comment={comment}" in argv
    assert parse_comment(comment) == {"owner": "op@jump", "plan": plan.plan_hash,
                                      "dir": "/srv/sparktui/run one"}
    assert parse_comment("someone else's job") == {}
    argv = step_argv("gpu04", settings, 3, "812", "/srv/sparktui/r", 2)
    assert argv[-3:] == ["-I", "/srv/sparktui/r/slurm_step.py", "/srv/sparktui/r/rank3-2.json"]
    assert "--output=/srv/sparktui/r/rank3-2.srun" in argv and "--jobid=812" in argv


def test_the_plan_view_prints_the_runner_as_text() -> None:
    from rich.console import Console

    from sparktui.cli.render import plan_view

    plan = build_plan(load_recipe(SEED), load_cluster_text(CLUSTER))
    console = Console(width=200, record=True, color_system=None)
    console.print(plan_view(plan))
    text = console.export_text()
    assert "allocation (on the login node login1:2222)" in text
    assert "--nodelist=gpu01,gpu02,gpu03,gpu04" in text
    assert "rank 3 step" in text and "--nodelist=gpu04" in text
