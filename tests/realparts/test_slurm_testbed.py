"""The test cluster's Slurm (sparktui_testbed/slurm.py) works, checked with real parts only.

The login node is reached over real SSH (asyncssh, its host key verified against Slurm's
known_hosts) and runs the real Slurm clients there; jobs run on the real slurmd of every node,
their steps `docker run` on each node's own engine (seen through the docker SDK on that
engine's socket) and write to the shared folder; the real epilog removes a cancelled job's
containers; a second unix user's job holds every node; a node's slurmd is stopped, set DOWN
and comes back.

Needs what the testbed needs (root, netns, sshd, dockerd) and Slurm (slurmctld, slurmd,
slurm-client, munge); skips otherwise, except under CI=true where it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

import sparktui_testbed as tbm
from sparktui_testbed import faults as tbf
from tests.realparts.conftest import IMAGE

pytestmark = pytest.mark.realparts

LABEL = "sparktui.slurm.job"
# the node's own address, as a process on the node's network sees it (sends nothing)
OWN_IP = (
    "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
    "s.connect(('10.250.0.1', 9)); print(s.getsockname()[0])"
)


def _login(tb: Any, cmd: str, *, user: str = "root", input: str | None = None) -> tuple[int, str, str]:
    """Run cmd on the login node over SSH as user: (exit status, stdout, stderr)."""
    import asyncssh

    async def go() -> tuple[int, str, str]:
        async with asyncssh.connect(
            tb.slurm.login.ip,
            port=tb.slurm.login.ssh_port,
            username=user,
            client_keys=[tb.identity],
            known_hosts=tb.slurm.known_hosts,
            agent_path=None,
            config=None,
            connect_timeout=10,
        ) as conn:
            res = await conn.run(cmd, input=input, check=False)
            return int(res.exit_status or 0), str(res.stdout), str(res.stderr)

    return asyncio.run(asyncio.wait_for(go(), timeout=120))


def _states(tb: Any) -> dict[str, str]:
    return tbm.slurm_states(tb.state_dir)


def _wait(what: str, ok: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = ok()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.2)


def _all_idle(tb: Any) -> bool:
    states = _states(tb)
    return all(states.get(n.name) == "idle" for n in tb.nodes)


def _labelled(clients: list[docker.DockerClient], value: str) -> dict[int, list[Any]]:
    """Each node's containers with the label (sparse: one listed and removed before its
    inspect, by the epilog at work, is not an error)."""
    return {
        i: c.containers.list(all=True, sparse=True, filters={"label": f"{LABEL}={value}"})
        for i, c in enumerate(clients)
    }


@pytest.fixture
def slurm_tb(testbed: Any) -> Iterator[Any]:
    """The testbed with its Slurm idle before and after the test (the test's jobs cancelled)."""
    assert testbed.slurm is not None
    _wait("every node idle before the test", lambda: _all_idle(testbed))
    yield testbed
    sd = testbed.state_dir
    for user in ("root", testbed.slurm.second_user):
        tbm.slurm_command(sd, ["scancel", f"--user={user}"])
    for node in testbed.nodes:  # what a failed test may have left: a stopped slurmd, a DOWN node
        state = tbm.start_slurmd(sd, node.name, wait=False)
        if state.startswith(("down", "drain")):  # it may be back already (ReturnToService=2)
            with contextlib.suppress(tbm.TestbedError):
                tbm.set_slurm_state(sd, node.name, "RESUME")
    _wait("every node idle after the test", lambda: _all_idle(testbed))


@pytest.fixture
def clients(testbed: Any) -> Iterator[list[docker.DockerClient]]:
    cs = [docker.DockerClient(base_url=f"unix://{n.docker_socket}") for n in testbed.nodes]
    yield cs
    for c in cs:
        c.close()


def test_status_reports_every_slurm_daemon_healthy(slurm_tb: Any) -> None:
    st = tbm.status(slurm_tb.state_dir)
    assert st["up"], st
    h = st["slurm"]
    assert h["munged_pid"] and h["slurmctld_pid"] and h["slurmctld_port_open"] and h["ssh_port_open"]
    assert {name: (bool(d["pid"]), d["port_open"], d["state"]) for name, d in h["slurmd"].items()} == {
        n.name: (True, True, "idle") for n in slurm_tb.nodes
    }
    assert tbm.load(slurm_tb.state_dir).slurm.conf == slurm_tb.slurm.conf


def test_sinfo_on_the_login_node_shows_every_node_idle_in_the_partition(slurm_tb: Any) -> None:
    s = slurm_tb.slurm
    rc, out, err = _login(slurm_tb, 'hostname; echo "$SLURM_CONF"; sinfo --noheader --Node --format="%N %P %T"')
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["login", s.conf]
    assert sorted(lines[2:]) == sorted(f"{n.name} {s.partition}* idle" for n in slurm_tb.nodes)
    # asyncssh checked the login node's host key against Slurm's known_hosts: it lists every
    # node and the login node; the testbed's lists exactly the nodes of cluster.toml
    ips = [n.ip for n in slurm_tb.nodes]
    assert [line.split()[0] for line in Path(s.known_hosts).read_text().splitlines()] == [*ips, s.login.ip]
    hosts = [line.split()[0] for line in Path(slurm_tb.known_hosts).read_text().splitlines()]
    assert hosts == ips


def test_srun_on_every_node_prints_their_names(slurm_tb: Any) -> None:
    n = len(slurm_tb.nodes)
    rc, out, err = _login(slurm_tb, f"srun --nodes={n} --ntasks={n} hostname")
    assert rc == 0, err
    assert sorted(out.split()) == sorted(node.name for node in slurm_tb.nodes)


def test_docker_steps_write_to_the_shared_folder_and_scancel_leaves_no_container(
    slurm_tb: Any, clients: list[docker.DockerClient]
) -> None:
    s, nodes = slurm_tb.slurm, slurm_tb.nodes
    out_dir = Path(s.shared) / f"job-{uuid.uuid4().hex[:8]}"
    out_dir.mkdir()
    rank = (
        'echo "rank $0 on $SLURMD_NODENAME at $(python3 -c "$1") job $SLURM_JOB_ID"; exec sleep 300'
    )
    lines = ["#!/bin/sh", f"#SBATCH --nodes={len(nodes)} --job-name=sptb-docker", f"#SBATCH --output={out_dir}/job.out"]
    for k, node in enumerate(nodes):
        docker_run = [
            "docker", "run", "--rm", "--network=host", "--sig-proxy=false",
            f"--label={LABEL}=$SLURM_JOB_ID",
            "-e", "SLURMD_NODENAME", "-e", "SLURM_JOB_ID",
            IMAGE, "sh", "-c", rank, str(k), OWN_IP,
        ]
        # the label's value is the job's id, expanded by the batch script's shell
        words = " ".join(w if w.startswith("--label=") else shlex.quote(w) for w in docker_run)
        lines.append(
            f"srun --nodes=1 --ntasks=1 --nodelist={node.name} --job-name=rank{k} "
            f"--output={out_dir}/rank{k}.out {words} &"
        )
    lines.append("wait")
    rc, out, err = _login(slurm_tb, "sbatch --parsable", input="\n".join(lines) + "\n")
    assert rc == 0, err
    job = out.strip().split(";")[0]
    assert job.isdigit(), out

    def outputs() -> list[str] | None:
        got = [(out_dir / f"rank{k}.out") for k in range(len(nodes))]
        texts = [p.read_text() if p.exists() else "" for p in got]
        return texts if all(t.endswith("\n") for t in texts) else None

    texts = _wait("every rank's output in the shared folder", outputs)
    assert texts == [f"rank {k} on {n.name} at {n.ip} job {job}\n" for k, n in enumerate(nodes)]
    running = _labelled(clients, job)
    assert {i: [c.status for c in cs] for i, cs in running.items()} == {
        i: ["running"] for i in range(len(nodes))
    }
    # a container of the job started outside Slurm goes too; another job's label stays
    stray = clients[0].containers.run(IMAGE, ["sleep", "300"], detach=True, labels={LABEL: job})
    other = clients[0].containers.run(IMAGE, ["sleep", "300"], detach=True, labels={LABEL: "999999"})
    try:
        rc, _, err = _login(slurm_tb, f"scancel {job}")
        assert rc == 0, err
        _wait(
            "no container of the cancelled job on any node",
            lambda: not any(_labelled(clients, job).values()),
        )
        gone = [c.id for cs in running.values() for c in cs] + [stray.id]
        for c in clients:
            assert not [x for x in c.containers.list(all=True) if x.id in gone]
        other.reload()
        assert other.status == "running"
        rc, out, _ = _login(slurm_tb, f"squeue --noheader --jobs={job} --states=all --format=%T")
        assert out.strip() in ("", "CANCELLED", "COMPLETING"), out
    finally:
        for c in (other, stray):
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)


def test_the_epilog_waits_for_an_engine_starting_again_and_removes_the_jobs_containers(
    slurm_tb: Any, clients: list[docker.DockerClient]
) -> None:
    """A job ended while its node's dockerd was down, crashed and starting again (the Slurm
    soak's seed 701: a node set down and its dockerd killed as the job ended there): the
    containers come back with the engine, and the epilog, asking again until the engine
    answers, removes them. It took a silent engine for one with nothing to remove, and a
    container of the ended job was left."""
    node = slurm_tb.nodes[0]
    rc, out, err = _login(slurm_tb, f"sbatch --parsable --nodes=1 --nodelist={node.name} "
                                    "--job-name=sptb-epilog --output=/dev/null --wrap='sleep 300'")
    assert rc == 0, err
    job = out.strip().split(";")[0]
    _wait("the job running", lambda: _login(
        slurm_tb, f"squeue --noheader --jobs={job} --format=%T")[1].strip() == "RUNNING")
    mine = clients[0].containers.run(IMAGE, ["sleep", "300"], detach=True, labels={LABEL: job})
    tbf.kill_dockerd(node)
    try:
        rc, _, err = _login(slurm_tb, f"scancel {job}")
        assert rc == 0, err
        time.sleep(3)  # the epilog meets the silent engine
        rc, out, _ = _login(slurm_tb, f"squeue --noheader --jobs={job} --states=all --format=%T")
        assert out.strip() == "COMPLETING", out  # its epilog still waits
    finally:
        tbf.start_dockerd(slurm_tb, node)
        tbf.wait_dockerd(node)
    try:
        _wait("the ended job's container removed once the engine is back",
              lambda: not _labelled(clients, job)[0])
        _wait("the node idle again, not drained", lambda: _states(slurm_tb).get(node.name) == "idle")
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            mine.remove(force=True)


def test_a_second_users_job_holds_every_node(slurm_tb: Any) -> None:
    s, sd = slurm_tb.slurm, slurm_tb.state_dir
    other = s.second_user
    assert other
    # that user logs in to the login node with the testbed's key, and submits there; the job
    # takes whole nodes (--exclusive: CR_CPU would let another job use a node's other CPU)
    rc, out, err = _login(
        slurm_tb,
        f"id -un; sbatch --parsable --nodes={len(slurm_tb.nodes)} --exclusive --job-name=hold"
        " --wrap='sleep 300'",
        user=other,
    )
    assert rc == 0, err
    name, hold = out.split()
    assert name == other and hold.isdigit()
    _wait("the hold job running", lambda: all(
        st == "allocated" for st in _states(slurm_tb).values()))
    cp = tbm.slurm_command(sd, ["sbatch", "--parsable", "--nodes=1", "--wrap=true"])
    assert cp.returncode == 0, cp.stderr
    mine = cp.stdout.strip()

    def queue() -> dict[str, tuple[str, str]]:
        cp = tbm.slurm_command(sd, ["squeue", "--noheader", "--format=%i %u %T"])
        return {i: (u, t) for i, u, t in (line.split() for line in cp.stdout.splitlines())}

    _wait("root's job pending behind the hold", lambda: queue().get(mine) == ("root", "PENDING"))
    assert queue()[hold] == (other, "RUNNING")
    cp = tbm.slurm_command(sd, ["scancel", hold], user=other)
    assert cp.returncode == 0, cp.stderr
    _wait("root's job ran once the nodes were free", lambda: mine not in queue() and hold not in queue())


def test_a_stopped_slurmd_set_down_is_seen_and_comes_back_idle(slurm_tb: Any) -> None:
    node = slurm_tb.nodes[-1]
    sd = slurm_tb.state_dir
    tbm.stop_slurmd(sd, node.name, down=True)
    try:
        assert tbm.status(sd)["slurm"]["slurmd"][node.name]["pid"] is None
        rc, out, err = _login(slurm_tb, f"sinfo --noheader --Node --nodes={node.name} --format='%T %E'")
        assert rc == 0, err
        state, reason = out.split(None, 1)
        assert state.startswith("down") and reason.strip() == "sparktui testbed: slurmd stopped", out
        rc, out, _ = _login(slurm_tb, f"srun --nodelist={node.name} --immediate=2 hostname")
        assert rc != 0 and node.name not in out
    finally:
        back = tbm.start_slurmd(sd, node.name)
    assert back == "idle"
    rc, out, err = _login(slurm_tb, f"srun --nodelist={node.name} hostname")
    assert (rc, out) == (0, f"{node.name}\n"), err


def test_set_down_and_resume_through_scontrol(slurm_tb: Any) -> None:
    node = slurm_tb.nodes[0]
    tbm.set_slurm_state(slurm_tb.state_dir, node.name, "DOWN", "maintenance")
    assert _states(slurm_tb)[node.name].startswith("down")
    tbm.set_slurm_state(slurm_tb.state_dir, node.name, "RESUME")
    _wait("the node idle again", lambda: _states(slurm_tb)[node.name] == "idle")
