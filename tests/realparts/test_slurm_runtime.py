"""The Slurm runtime on the real 4-node test cluster's Slurm (slurmctld on the login node, a
slurmd per node): sparktui reaches the login node over real SSH, asks for one allocation with
``salloc``, starts one ``srun`` step per rank whose supervisor runs the rank's container on the
node's own dockerd, and follows each rank's log file in the shared folder through the login
node. Everything is checked from outside as well: ``squeue`` as root and as a second user,
each node's Docker engine through the docker SDK, the files in the shared folder.

The seed runs as tests/realparts/test_seed_args.py runs it (its engine the demo engine, its
must-show lines printed by the image); the other tests use the demo recipe. Their ports are
their own: another module's group may still hold the usual ones.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

import sparktui_testbed as tbm
from sparktui.ui.app import SparkApp
from sparktui.ui.logstore import TEXT
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.widgets.rank_table import RankTable
from tests.conftest import ROOT
from tests.realparts.conftest import _unavailable
from tests.realparts.test_seed_args import write_seed
from tests.realparts.test_seed_checks import seed_checkpoints
from tests.runner import Cli, sparktui_cli, state_env
from tests.ui import fuzz
from tests.ui.conftest import wait_for

pytestmark = pytest.mark.realparts

SEED_PORT, DEMO_PORT, DIST_PORT = 30600, 30700, 25600
DEMO = ROOT / "recipes" / "demo-tp4"
TICK = re.compile(r"demo tick (\d+)$")


# -- the cluster, from outside ---------------------------------------------------------------
def squeue(tb: Any, *args: str, user: str = "root") -> list[list[str]]:
    """The jobs Slurm lists (id, name, user, state, nodes), as ``user`` sees them."""
    cp = tbm.slurm_command(tb.state_dir, ["squeue", "--noheader", "--format=%i|%j|%u|%T|%N", *args],
                           user=user)
    assert cp.returncode == 0, cp.stderr
    return [line.split("|") for line in cp.stdout.splitlines() if line.strip()]


def containers(tb: Any, slug: str) -> dict[int, list[Any]]:
    """Per node index, this recipe's containers (any state), read from that node's engine."""
    out = {}
    for node in tb.nodes:
        client = docker.DockerClient(base_url=f"unix://{node.docker_socket}")
        out[node.index] = client.containers.list(all=True, filters={"label": f"sparktui.recipe={slug}"})
    return out


def running_ids(tb: Any, slug: str) -> dict[int, str]:
    found = {i: [c for c in cs if c.status == "running"] for i, cs in containers(tb, slug).items()}
    assert all(len(cs) == 1 for cs in found.values()), found
    return {i: cs[0].id for i, cs in found.items()}


def status(cli: Cli, recipe: Path | None = None) -> dict[str, Any]:
    res = cli("status", "--json") if recipe is None else cli("status", "--json", recipe=recipe)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def wait_status(cli: Cli, recipe: Path, want: Callable[[dict[str, Any]], bool], timeout: float,
                why: str) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while True:
        st = status(cli, recipe)
        if want(st):
            return st
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {why}: {st['ranks']}")
        time.sleep(0.5)


def generate(host: str, port: int) -> None:
    """One chat completion from the head, straight over the test cluster's bridge (the engine
    logs a ``Prefill batch`` line for it)."""
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
    req = urllib.request.Request(f"http://{host}:{port}/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as res:
        assert res.status == 200
        res.read()


def states(st: dict[str, Any]) -> list[str]:
    return [r["state"] for r in st["ranks"]]


def settle(tb: Any) -> None:
    """Every node in service and no job left, whoever's (a test that failed midway)."""
    for user in ("root", tb.slurm.second_user):
        tbm.slurm_command(tb.state_dir, ["scancel", f"--user={user}"], user=user)
    for node in tb.nodes:
        if tbm.slurm_states(tb.state_dir).get(node.name, "").rstrip("*~#") not in ("idle", "mixed", "allocated"):
            tbm.start_slurmd(tb.state_dir, node.name)
    end = time.monotonic() + 60
    while not all(s == "idle" for s in tbm.slurm_states(tb.state_dir).values()):
        assert time.monotonic() < end, tbm.slurm_states(tb.state_dir)
        time.sleep(0.3)


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slurm(testbed: Any) -> Iterator[Any]:
    if testbed.slurm is None:
        _unavailable("the test cluster has no Slurm")
    settle(testbed)
    yield testbed
    settle(testbed)


@pytest.fixture(scope="module")
def cluster(slurm: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test cluster's Slurm cluster file, its rendezvous port this module's own."""
    text = Path(slurm.slurm.cluster_file).read_text()
    assert 'kind = "slurm"' in text and text.count("dist_init_port = ") == 1
    path = tmp_path_factory.mktemp("slurm-cluster") / "cluster.toml"
    path.write_text(re.sub(r"dist_init_port = \d+", f"dist_init_port = {DIST_PORT}", text))
    return path


@pytest.fixture(scope="module")
def seed(slurm: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    seed_checkpoints(slurm)
    folder = write_seed(tmp_path_factory.mktemp("recipes") / "seed-slurm", clamped=False)
    path = folder / "recipe.toml"
    path.write_text(re.sub(r"\nport = \d+\n", f"\nport = {SEED_PORT}\n", path.read_text(), count=1))
    return folder


def demo_variant(folder: Path, name: str, extra: str = "") -> Path:
    text = (DEMO / "recipe.toml").read_text()
    assert text.count("\nport = 30000\n") == 1
    text = text.replace("\nport = 30000\n", f"\nport = {DEMO_PORT}\n", 1)
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "recipe.toml").write_text(text + extra)
    return folder / name


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm-state")


@pytest.fixture(scope="module")
def cli(slurm: Any, cluster: Path, seed: Path, state: Path) -> Iterator[Cli]:
    run = sparktui_cli(str(cluster), state_env(state), seed)
    yield run
    run("down")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, cli: Cli) -> Iterator[Path]:
    folder = demo_variant(tmp_path_factory.mktemp("demo-recipes"), "demo-slurm")
    yield folder
    cli("down", recipe=folder)


def console(cluster: Path, state: Path, folder: Path) -> SparkApp:
    """The console on ``folder``'s recipe (its folder name is its slug)."""
    return SparkApp(ConsoleOptions([folder.parent], cluster, state_root=state / "sparktui",
                                   recipe=folder.name, remember=False, cursor_blink=False))


# -- 1. the seed, unmodified, in one allocation --------------------------------------------
def test_the_seed_plans_stages_and_boots_in_one_allocation(cli: Cli, slurm: Any, seed: Path,
                                                           testbed: Any) -> None:
    plan = cli("plan")
    assert plan.returncode == 0, plan.stderr
    text = plan.stdout
    assert "allocation (on the login node 10.250.0.10)" in text and "salloc" in text
    assert "--nodelist=node0,node1,node2,node3" in text and "--partition=spark" in text
    for rank in range(4):
        assert f"rank {rank} step" in text
    assert text.count("--overlap") == 4 and "slurm_step.py" in text

    first = cli("stage")
    assert first.returncode == 0, first.stderr
    for node in testbed.nodes:
        assert re.search(rf"{node.name}: 2 packed · [\d.]+ KiB written", first.stdout), first.stdout
    again = cli("stage")
    assert again.returncode == 0, again.stderr
    for node in testbed.nodes:  # a second stage writes nothing
        assert f"{node.name}: 2 verified · 0 B written" in again.stdout, again.stdout
    # the bytes are the packed bytes: the agent run straight over each node's SSH verifies them
    ssh = sparktui_cli(testbed.cluster_file, state_env(Path(str(seed) + "-ssh-state")), seed)
    verified = ssh("stage")
    assert verified.returncode == 0, verified.stderr
    for node in testbed.nodes:
        assert f"{node.name}: 2 verified · 0 B written" in verified.stdout, verified.stdout

    up = cli("up", "--wait")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "check failed" not in up.stderr and re.search(r"ready: 4 ranks, (\d+)/\1 checks passed", up.stdout)
    st = status(cli)
    assert states(st) == ["ready"] * 4
    jobs = [j for j in squeue(slurm) if j[1] == "sparktui.seed-slurm"]
    assert len(jobs) == 1 and jobs[0][3] == "RUNNING" and jobs[0][4] == "node[0-3]", jobs
    job = jobs[0][0]
    assert st["allocation"].startswith(f"Slurm job {job} running on node[0-3] (partition spark), ")
    assert [r["container_id"] for r in st["ranks"]] == [f"slurm-{job}-r{r}-1" for r in range(4)]
    for index, cs in containers(slurm, "seed-slurm").items():  # one container a node, the job's
        assert [(c.status, c.labels["sparktui.rank"], c.labels["sparktui.slurm.job"]) for c in cs] == [
            ("running", str(index), job)]
    shown = cli("status").stdout
    assert f"allocation: Slurm job {job} running on node[0-3]" in shown
    grep = cli("logs", "--grep", "Worker ready")
    assert sorted(line.split()[0] for line in grep.stdout.splitlines()) == ["r1", "r2", "r3"]


async def test_the_console_shows_the_job_each_ranks_log_and_greps_live(
        cli: Cli, slurm: Any, cluster: Path, state: Path, seed: Path) -> None:
    job = status(cli)["allocation"].split()[2]
    app = console(cluster, state, seed)
    async with app.run_test(size=(160, 48)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 30, "the seed to open on Slurm")
        await wait_for(pilot, lambda: main.session is not None and main.session.attached, 30,
                       "the seed attached")
        subtitle = lambda: str(main.nodes_panel.border_subtitle or "")  # noqa: E731
        await wait_for(pilot, lambda: f"Slurm job {job} running on node[0-3]" in subtitle(), 20,
                       "the job in the Nodes panel")
        assert "(partition spark)" in subtitle() and " left" in subtitle()
        await wait_for(pilot, lambda: all(len(main.store.lines(r)) > 20 for r in range(4)), 20,
                       "every rank's log")
        table = main.query_one(RankTable)
        assert list(table.nodes) == ["node0", "node1", "node2", "node3"]
        await fuzz.press(app, "slash")
        await wait_for(pilot, lambda: main.logs.grep_input.has_focus, 5, "the grep input")
        await fuzz.press(app, *"Prefill", "enter")
        await wait_for(pilot, lambda: main.logs.model.line_filter.text == "Prefill", 5, "the grep")
        seen = main.logs.model.matches or 0
        for _ in range(2):  # requests to the head: lines that arrive while the grep is on
            await asyncio.to_thread(generate, slurm.nodes[0].ip, SEED_PORT)
        await wait_for(pilot, lambda: (main.logs.model.matches or 0) >= seen + 2, 10,
                       "new lines matching, live")
    down = cli("down")
    assert down.returncode == 0, down.stderr
    assert not [j for j in squeue(slurm) if j[1] == "sparktui.seed-slurm"]
    assert not any(containers(slurm, "seed-slurm").values())


# -- 2. restart one rank, the group, down -------------------------------------------------
def test_restart_one_rank_then_the_group_in_the_same_job_then_down(cli: Cli, slurm: Any,
                                                                   demo: Path) -> None:
    up = cli("up", "--wait", recipe=demo)
    assert up.returncode == 0, up.stderr
    job = status(cli, demo)["allocation"].split()[2]
    before = running_ids(slurm, "demo-slurm")
    one = cli("restart", "--rank", "2", recipe=demo)
    assert one.returncode == 0, one.stderr
    after = {i: [c for c in cs if c.labels["sparktui.slurm.job"] == job]
             for i, cs in containers(slurm, "demo-slurm").items()}
    # only node 3 (rank 2) has a new container; the others' are the same ones (the TP group
    # fell with rank 2, as it does on any cluster: they stopped, nobody replaced them)
    assert [c.id for c in after[2] if c.status == "running"] != [before[2]]
    assert len(after[2]) == 1 and after[2][0].id != before[2]
    for i in (0, 1, 3):
        assert [c.id for c in after[i]] == [before[i]]
    st = status(cli, demo)
    assert st["allocation"].split()[2] == job  # the same job
    assert [r["restarts"] for r in st["ranks"]] == [0, 0, 1, 0]
    assert st["ranks"][2]["container_id"] == f"slurm-{job}-r2-2"
    logs = cli("logs", "--rank", "2", recipe=demo).stdout.splitlines()
    marker = [i for i, line in enumerate(logs) if "--- sparktui: rank 2 restarted by the operator" in line]
    assert len(marker) == 1 and "slurm-" in logs[marker[0]]
    assert any("DEMO rendezvous ok" in line for line in logs[: marker[0]])
    assert len(logs) > marker[0] + 1

    group = cli("restart", "--group", "--wait", recipe=demo)
    assert group.returncode == 0, group.stdout + group.stderr
    st = status(cli, demo)
    assert states(st) == ["ready"] * 4 and st["allocation"].split()[2] == job
    fresh = running_ids(slurm, "demo-slurm")
    assert all(fresh[i] not in (before[i], after[i][0].id) for i in range(4)), "every container is new"
    assert [j[0] for j in squeue(slurm) if j[1] == "sparktui.demo-slurm"] == [job]

    down = cli("down", recipe=demo)
    assert down.returncode == 0, down.stderr
    assert not [j for j in squeue(slurm) if j[1] == "sparktui.demo-slurm"]
    assert not any(containers(slurm, "demo-slurm").values())
    assert states(status(cli, demo)) == ["pending"] * 4


# -- 3. queued while another user holds the partition ----------------------------------------
async def test_ranks_wait_queued_while_another_user_holds_every_node(
        cli: Cli, slurm: Any, demo: Path, cluster: Path, state: Path) -> None:
    other = slurm.slurm.second_user
    held = tbm.slurm_command(slurm.state_dir, ["sbatch", "--parsable", "--exclusive", "-N4",
                                              "--job-name=hold", "--output=/dev/null",
                                              "--wrap=sleep 600"], user=other)
    assert held.returncode == 0, held.stderr
    hold = held.stdout.strip().split(";")[0]
    end = time.monotonic() + 20
    while [j[3] for j in squeue(slurm) if j[0] == hold] != ["RUNNING"]:
        assert time.monotonic() < end, squeue(slurm)
        time.sleep(0.2)
    env = state_env(state)
    argv = [sys.executable, "-m", "sparktui", "up", str(demo), "--cluster", str(cluster), "--wait"]
    up = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    try:
        # Slurm's reason comes with its first scheduling pass ("None" until then): wait for it
        st = await asyncio.to_thread(
            wait_status, cli, demo, lambda s: states(s) == ["queued"] * 4 and all(
                "pending (Resources)" in r["detail"] for r in s["ranks"]), 60,
            "every rank queued, with Slurm's reason")
        for r in st["ranks"]:
            assert "pending (Resources)" in r["detail"] and "partition spark" in r["detail"], r
        assert st["allocation"].endswith("pending (Resources) in partition spark")
        app = console(cluster, state, demo)
        async with app.run_test(size=(160, 48)) as pilot:
            main = app.main_screen
            await wait_for(pilot, main.ready.is_set, 30, "the recipe to open")
            await wait_for(pilot, lambda: all(
                (s := main.state.ranks.get(r)) is not None and s.state == "queued"
                and "pending (Resources)" in s.detail for r in range(4)), 30,
                "every rank queued in the console")
        assert up.poll() is None  # still waiting for the nodes
        assert tbm.slurm_command(slurm.state_dir, ["scancel", hold], user=other).returncode == 0
        out, err = await asyncio.to_thread(up.communicate, timeout=120)
        assert up.returncode == 0, out + err
        assert "queued · waiting for the scheduler: Slurm job" in out + err
        assert states(status(cli, demo)) == ["ready"] * 4
    finally:
        if up.poll() is None:
            up.kill()
        tbm.slurm_command(slurm.state_dir, ["scancel", hold], user=other)
    assert cli("down", recipe=demo).returncode == 0


# -- 4. a node lost mid-run, and the watchdog -----------------------------------------------
def test_a_lost_node_fails_its_rank_first_and_the_watchdog_brings_the_group_back(
        cli: Cli, slurm: Any, cluster: Path, state: Path, tmp_path: Path) -> None:
    recipe = demo_variant(tmp_path, "demo-slurm",
                          '\n[restart]\npolicy = "group"\nmax = 2\nwindow = "6h"\n')
    up = cli("up", "--wait", recipe=recipe)
    assert up.returncode == 0, up.stderr
    job = status(cli, recipe)["allocation"].split()[2]
    err = tmp_path / "watch.err"
    argv = [sys.executable, "-m", "sparktui", "watch", str(recipe), "--cluster", str(cluster)]
    with err.open("w") as f:
        watch = subprocess.Popen(argv, cwd=ROOT, env=state_env(state), stdout=subprocess.DEVNULL,
                                 stderr=f)
    try:
        end = time.monotonic() + 20
        while "watching" not in err.read_text():
            assert watch.poll() is None and time.monotonic() < end, err.read_text()
            time.sleep(0.2)
        time.sleep(2)  # armed: it saw every rank ready
        tbm.stop_slurmd(slurm.state_dir, "node2", down=True, lost=True)
        end = time.monotonic() + 30
        while "restarting the whole group" not in err.read_text():
            assert time.monotonic() < end, err.read_text()
            time.sleep(0.3)
        said = err.read_text()
        assert re.search(rf"rank 2: failed · its place was lost: Slurm job {job} ended NODE_FAIL", said), said
        assert "(1 of 2 in 6h): rank 2 failed after ready" in said, said
        for rank in (0, 1, 3):
            assert re.search(rf"rank {rank}: failed · rank 2 failed first", said), said
        # the group waits for Slurm to give the nodes again: queued while node2 is down
        # Slurm's reason comes with its next scheduling pass ("None" until then): wait for it
        st = wait_status(cli, recipe, lambda s: states(s) == ["queued"] * 4 and any(
            why in s["ranks"][0]["detail"] for why in ("(ReqNodeNotAvail", "(Resources")),
            90, "queued again, with Slurm's reason")
        queued = re.search(r"waiting for the scheduler: Slurm job (\d+) pending", st["ranks"][0]["detail"])
        assert queued and queued[1] != job, st["ranks"][0]["detail"]  # a new job, not the lost one
        # back in service; the queued group may take it at once (mixed or allocated)
        assert tbm.start_slurmd(slurm.state_dir, "node2") in ("idle", "mixed", "allocated")
        st = wait_status(cli, recipe, lambda s: states(s) == ["ready"] * 4, 90, "the group back")
        again = st["allocation"].split()[2]
        assert again != job and [r["restarts"] for r in st["ranks"]] == [1, 1, 1, 1]
        assert [r["container_id"] for r in st["ranks"]] == [f"slurm-{again}-r{r}-1" for r in range(4)]
    finally:
        watch.terminate()
        watch.wait(15)
        tbm.start_slurmd(slurm.state_dir, "node2")
    assert cli("down", recipe=recipe).returncode == 0
    for c in containers(slurm, "demo-slurm")[2]:  # the lost node's own: no epilog ran there
        c.remove(force=True)


# -- 5. the login node's sshd restarted while logs are followed ----------------------------
async def test_login_sshd_restart_loses_no_line_in_logs_follow_or_the_console(
        cli: Cli, slurm: Any, demo: Path, cluster: Path, state: Path, tmp_path: Path) -> None:
    up = cli("up", "--wait", recipe=demo)
    assert up.returncode == 0, up.stderr
    follow_out = tmp_path / "follow.out"
    argv = [sys.executable, "-m", "sparktui", "logs", str(demo), "--cluster", str(cluster), "-f"]
    other_state = tmp_path / "follow-state"  # its own state: the console follows the run too
    with follow_out.open("w") as f:
        follow = subprocess.Popen(argv, cwd=ROOT, env=state_env(other_state), stdout=f,
                                  stderr=subprocess.STDOUT)
    app = console(cluster, state, demo)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            main = app.main_screen
            await wait_for(pilot, lambda: main.session is not None and main.session.attached, 30,
                           "the console attached")
            await pilot.pause(2)
            await asyncio.to_thread(tbm.stop_sshd, slurm.state_dir, "login")
            try:
                await pilot.pause(4)
            finally:
                await asyncio.to_thread(tbm.start_sshd, slurm.state_dir, "login")
            back = {r: len(t) for r, t in (await asyncio.to_thread(own_ticks, slurm, demo)).items()}

            def ticks_shown() -> dict[int, list[int]]:
                return {r: [int(m[1]) for line in main.store.lines(r)
                            if (m := TICK.search(line[TEXT]))] for r in range(4)}

            # reconnected, and caught up: past the ticks written until the sshd was back
            await wait_for(pilot, lambda: all(
                len(t) >= max(12, back[r] + 2) for r, t in ticks_shown().items()) and all(
                len(t) >= max(12, back[r] + 2) for r, t in followed_ticks(follow_out).items()),
                30, "the console and logs -f past the outage")
            shown = ticks_shown()
    finally:
        follow.terminate()
        follow.wait(15)
    own = own_ticks(slurm, demo)
    for rank, ticks in shown.items():
        assert ticks == list(range(1, len(ticks) + 1)), f"rank {rank} in the console: {ticks}"
        assert len(ticks) >= 12 and ticks == own[rank][: len(ticks)]
    for rank, ticks in followed_ticks(follow_out).items():
        assert ticks == list(range(1, len(ticks) + 1)), f"rank {rank} in logs -f: {ticks}"
        assert len(ticks) >= 12 and ticks == own[rank][: len(ticks)]


def followed_ticks(follow_out: Path) -> dict[int, list[int]]:
    """The tick numbers ``logs -f`` printed so far, per rank."""
    followed: dict[int, list[int]] = {r: [] for r in range(4)}
    for line in follow_out.read_text().splitlines():
        if (m := TICK.search(line)) and line[:2] in ("r0", "r1", "r2", "r3"):
            followed[int(line[1])].append(int(m[1]))
    return followed


def own_ticks(tb: Any, demo: Path) -> dict[int, list[int]]:
    """What each rank's own supervisor wrote: its log file in the run's folder."""
    del demo
    folder = max(Path(tb.slurm.shared).glob("demo-slurm-*"), key=lambda p: p.stat().st_mtime)
    out = {}
    for rank in range(4):
        log = max(folder.glob(f"rank{rank}-*.log"))
        out[rank] = [int(m[1]) for line in log.read_text().splitlines() if (m := TICK.search(line))]
    return out


# -- 6. another Slurm user --------------------------------------------------------------------
def test_another_slurm_user_sees_the_run_as_theirs_and_their_down_leaves_it(
        cli: Cli, slurm: Any, demo: Path, cluster: Path, tmp_path: Path) -> None:
    st = status(cli, demo)
    if states(st) != ["ready"] * 4:
        assert cli("up", "--wait", recipe=demo).returncode == 0
    job = status(cli, demo)["allocation"].split()[2]
    theirs = tmp_path / "other.toml"
    other = slurm.slurm.second_user
    theirs.write_text(cluster.read_text().replace('user = "root"', f'user = "{other}"', 1))
    run = sparktui_cli(str(theirs), state_env(tmp_path / "other-state"), demo)
    seen = status(run, demo)
    assert states(seen) == ["pending"] * 4 and not seen["allocation"]
    assert len(seen["held"]) == 4
    for held in seen["held"]:
        assert held["owner"].endswith(f"(Slurm user root, job {job})"), held
        assert held["created"], held
    shown = run("status").stdout
    assert "not yours" in shown and f"Slurm user root, job {job}" in shown
    down = run("down")
    assert down.returncode == 0, down.stderr
    assert [j[0] for j in squeue(slurm, user=other) if j[1] == "sparktui.demo-slurm"] == [job]
    assert states(status(cli, demo)) == ["ready"] * 4  # still the first user's, still running


# -- doctor -------------------------------------------------------------------------------
def test_doctor_reports_each_nodes_slurm_state_engine_and_image(cli: Cli, slurm: Any, demo: Path) -> None:
    ok = cli("doctor", "--json", recipe=demo)
    findings = {(f["node"], f["check"]): f for f in json.loads(ok.stdout)}
    assert ok.returncode == 0, findings
    for node in slurm.nodes:
        assert findings[(node.name, "slurm")]["sentence"].endswith("in partition spark")
        assert findings[(node.name, "docker")]["verdict"] == "passed"
        assert findings[(node.name, "image")]["sentence"].startswith("sparktui-demo:latest is ")
    assert findings[("all", "same image")]["verdict"] == "passed"
    tbm.set_slurm_state(slurm.state_dir, "node3", "DRAIN", "sparktui test: drained")
    try:
        res = cli("doctor", "--json", recipe=demo)
        drained = {(f["node"], f["check"]): f for f in json.loads(res.stdout)}[("node3", "slurm")]
        assert res.returncode == 1 and drained["verdict"] == "failed", drained
        assert drained["sentence"].startswith("drain") and "sparktui test: drained" in drained["sentence"]
    finally:
        tbm.set_slurm_state(slurm.state_dir, "node3", "RESUME", "")


async def test_a_ranks_last_lines_written_after_its_job_ended_are_read(
        slurm: Any, cluster: Path, tmp_path: Path) -> None:
    """The chaos soak's seed 401 at 265 s: node3 set DOWN ended the job while rank 0's
    supervisor, on another node, still had its container's last lines to write; its follower's
    ``tail`` ended on the job's end and read the rest before those lines came. Here the
    supervisor is the test, over the real login node and the real Slurm: a job Slurm no longer
    knows, its rank's log written 3 s into the follow (after the ``tail`` gave up on the job),
    the exit record after it; the follower reads the log to that record."""
    from sparktui.backend.runtimes.slurm import SlurmDocker, rank_id
    from sparktui.core.cluster import load_cluster
    from sparktui.core.slurmjob import step_name

    spec = load_cluster(cluster)
    rt = SlurmDocker(spec, [spec.nodes[0]], tmp_path / "state")
    folder = Path(slurm.slurm.shared) / f"late-lines-{time.monotonic_ns()}"
    folder.mkdir(mode=0o700)
    job = "99999999"  # no job of this number was ever submitted here: squeue says so at once
    rt.folders[job] = str(folder)
    base = folder / f"{step_name(0)}-1"
    log = base.with_name(base.name + ".log")
    log.write_text("2026-12-07T00:00:00.000000000Z demo tick 1\n")

    async def supervisor() -> None:
        await asyncio.sleep(3.0)  # FOLLOW asks Slurm every 2 s: its tail has ended by now
        with log.open("a") as f:
            f.write("2026-12-07T00:00:01.000000000Z demo tick 2\n"
                    "2026-12-07T00:00:01.100000000Z Received sigterm, shutting down\n")
        await asyncio.sleep(0.4)
        base.with_name(base.name + ".exit").write_text('{"status": "exited", "exit_code": 0}\n')

    late = asyncio.ensure_future(supervisor())
    texts: list[str] = []
    try:
        async with asyncio.timeout(30):
            async for chunk in rt.containers("node0").logs(rank_id(job, 0, 1), None):
                texts += [text for _ts, text in chunk.lines]
        await late
    finally:
        late.cancel()
        await rt.close()
    assert texts == ["demo tick 1", "demo tick 2", "Received sigterm, shutting down"], texts
