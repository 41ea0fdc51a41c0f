"""The ``slurm`` kind: ranks as steps of one Slurm job, started, listed and cancelled through
the login node's ``sbatch``, ``srun``, ``squeue`` and ``scancel`` over SSH (no Python client
matches Slurm 22.05, and slurmrestd has no step endpoints), each step running the rank's
container on its node's own Docker engine (``agents/slurm_step.py``).

Nothing here holds a rank: the job and its steps outlive sparktui as containers do. Everything
is found again from Slurm and the run's folder in the shared folder: the job by its name
(``sparktui.<recipe>``) and comment (owner, plan, folder; ``core.slurmjob.job_comment``), a
rank's attempt by its files there (``rank<N>-<attempt>.cid``, ``.exit``, ``.log``). A rank's
id is ``slurm-<job>-r<rank>-<attempt>``.

Every command goes through ``nodeshell.login_shell_command`` (any login shell reads it
literally), every value in it is a checked cluster-file value, a label sparktui made or a path
built from them.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import asyncssh

from sparktui.backend.http import Opener
from sparktui.backend.nodeshell import NodeError, SshShell, login_shell_command
from sparktui.backend.runtime import Containers, ContainerState, LogChunk, RuntimeLost
from sparktui.core.cluster import Cluster, Node
from sparktui.core.dockerview import docker_cli_args
from sparktui.core.kinds import kind_of
from sparktui.core.ownership import LABEL_OWNER
from sparktui.core.plan import LABEL_PLAN, LABEL_RANK, LABEL_RECIPE, Plan
from sparktui.core.rankspec import ContainerSpec
from sparktui.core.slurmjob import (
    SLURM,
    STEP_SUPERVISOR,
    SlurmSettings,
    job_name,
    job_script,
    parse_comment,
    step_argv,
    step_name,
)

LABEL_JOB = "sparktui.slurm.job"
"""On every container a step starts: what the job epilog removes when the job ends."""
LABEL_RUN = "sparktui.run"
POLL_S = 0.5
CHUNK_BYTES = 256 * 1024
START_TIMEOUT_S = 60.0  # the step's container id appears in its folder within this
ID = re.compile(r"slurm-(\d+)-r(\d+)-(\d+)")
SQUEUE = "%i|%T|%r|%N|%L|%u|%k"
"""Job id, state, reason, nodes, time left, user, comment."""


@dataclass(frozen=True)
class Job:
    """A job as ``squeue`` lists it."""

    id: str
    state: str  # PENDING, RUNNING, COMPLETING, ...
    reason: str  # Slurm's, while it waits ("Resources", "Priority", "None")
    nodes: str
    time_left: str
    user: str
    owner: str
    plan: str
    folder: str

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def parse_jobs(text: str) -> list[Job]:
    jobs = []
    for line in text.splitlines():
        parts = line.split("|", 6)
        if len(parts) != 7 or not parts[0].isdigit():
            continue
        meta = parse_comment(parts[6])
        jobs.append(Job(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5],
                        meta.get("owner", ""), meta.get("plan", ""), meta.get("dir", "")))
    return jobs


def rank_id(job: str, rank: int, attempt: int) -> str:
    return f"slurm-{job}-r{rank}-{attempt}"


class SlurmDocker:
    """One SSH connection to the login node; one ``SlurmSteps`` per node of the plan's ranks.
    Probes go from the login node to the rank's address (``NodeProbe``); one rank is replaced
    in the allocation (``RestartOne``)."""

    def __init__(self, cluster: Cluster, nodes: list[Node], state_root: Path) -> None:
        self.kind = kind_of(SLURM)
        settings = cluster.settings
        if not isinstance(settings, SlurmSettings):
            raise ValueError(f"cluster {cluster.name!r} has no [slurm] table")
        self.settings = settings
        self.cluster = cluster
        host, port = settings.login_host
        self.login_node = Node(index=-1, name="login", host=host, ssh_port=port, fabric_ip=host,
                               hf_cache="/", port_offset=0, ssh=nodes[0].ssh, docker=nodes[0].docker)
        self.login = SshShell(self.login_node)
        self.nodes = {n.name: n for n in nodes}
        self.order = [n.name for n in nodes]
        self.steps = {n.name: SlurmSteps(self, n) for n in nodes}
        self._job_lock = asyncio.Lock()
        self.job: Job | None = None

    # -- Runtime ----------------------------------------------------------------------------
    def containers(self, node: str) -> Containers:
        return self.steps[node]

    async def connect(self, node: str) -> None:
        await self.login.connect()

    def describe(self, node: str) -> str:
        return (f"through Slurm (partition {self.settings.partition}) on the login node "
                f"{self.settings.login}: {self.login.describe()}")

    async def close(self) -> None:
        await self.login.close()

    # -- NodeProbe ----------------------------------------------------------------------------
    def opener(self, node: str) -> Opener:
        return self.login.open_connection

    def shown_host(self, node: str) -> str:
        return self.nodes[node].host

    # -- RestartOne ---------------------------------------------------------------------------
    async def retire(self, node: str, container_id: str, timeout: float) -> None:
        await self.steps[node].stop(container_id, timeout=timeout)

    # -- the login node -------------------------------------------------------------------
    async def sh(self, argv: list[str], timeout: float = 30.0, stdin: str | None = None) -> str:
        """``argv`` on the login node; its stdout, or ``NodeError`` with its stderr."""
        if stdin is None:
            res = await self.login.run(argv, timeout=timeout)
            if not res.ok:
                raise NodeError("login", f"{argv[0]} exited {res.returncode}: "
                                         f"{(res.stderr or res.stdout).strip()[-500:]}")
            return res.stdout
        lines: list[str] = []
        rc = await self.login.stream(argv, lines.append, stdin=stdin)
        if rc != 0:
            raise NodeError("login", f"{argv[0]} exited {rc}: {' | '.join(lines)[-500:]}")
        return "\n".join(lines)

    async def jobs(self, slug: str) -> list[Job]:
        """Every user's jobs of this recipe (another user's is shown as theirs)."""
        out = await self.sh(["squeue", "--noheader", f"--name={job_name(slug)}",
                             f"--format={SQUEUE}"])
        return parse_jobs(out)

    async def job_of(self, job_id: str) -> Job | None:
        out = await self.sh(["squeue", "--noheader", f"--jobs={job_id}", f"--format={SQUEUE}"])
        found = [j for j in parse_jobs(out) if j.id == job_id]
        return found[0] if found else None

    # -- Allocation ---------------------------------------------------------------------------
    async def allocate(self, plan: Plan, run_id: str, waiting: Callable[[str], None]) -> None:
        spec = plan.ranks[0].container
        await self.ensure_job(spec, run_id, waiting)

    async def release(self) -> None:
        await self.cancel()

    async def ensure_job(self, spec: ContainerSpec, run_id: str,
                         waiting: Callable[[str], None] | None = None) -> Job:
        """This run's allocation: the operator's job of this recipe with this plan, or a new
        one; returns once it runs (``waiting`` hears Slurm's reason each time it changes)."""
        said = ""
        async with self._job_lock:
            owner = spec.labels.get(LABEL_OWNER, "")
            plan = spec.labels.get(LABEL_PLAN, "")
            slug = spec.labels[LABEL_RECIPE]
            if self.job is None:
                mine = [j for j in await self.jobs(slug) if j.owner == owner and j.plan == plan]
                self.job = mine[-1] if mine else await self._submit(slug, owner, plan, run_id)
            while not self.job.running:
                why = f"Slurm job {self.job.id} {self.job.state.lower() or 'submitted'}" + (
                    f" ({self.job.reason})" if self.job.reason not in ("", "None") else "")
                if waiting is not None and why != said:
                    waiting(why)
                    said = why
                await asyncio.sleep(POLL_S)
                now = await self.job_of(self.job.id)
                if now is None:
                    job, self.job = self.job, None
                    raise NodeError("login", f"Slurm job {job.id} ended before it ran "
                                             f"(last state {job.state}, reason {job.reason})")
                self.job = now
            return self.job

    async def _submit(self, slug: str, owner: str, plan: str, run_id: str) -> Job:
        folder = f"{self.settings.shared_dir}/{run_id}-{secrets.token_hex(3)}"
        script = job_script(slug, self.order, owner, plan, self.settings, folder)
        supervisor = resources.files("sparktui.agents").joinpath("slurm_step.py").read_text()
        await self.sh(["mkdir", "-p", "-m", "700", folder])
        await self.write(f"{folder}/job.sh", script)
        await self.write(f"{folder}/{STEP_SUPERVISOR}", supervisor)
        out = await self.sh(["sbatch", "--parsable", f"{folder}/job.sh"])
        job_id = out.strip().split(";")[0]
        if not job_id.isdigit():
            raise NodeError("login", f"sbatch said {out.strip()[:200]!r}, not a job id")
        return Job(job_id, "PENDING", "", "", "", "", owner, plan, folder)

    async def write(self, path: str, text: str) -> None:
        """A private file on the shared folder, written through the login node's stdin."""
        await self.sh(["sh", "-c", 'umask 077 && cat > "$1"', "sparktui-write", path], stdin=text)

    async def cancel(self) -> None:
        """The job ends: its steps get TERM first (their containers stop), then the job."""
        if self.job is None:
            return
        await self.sh(["scancel", "--signal=TERM", "--full", self.job.id])
        await self.sh(["scancel", self.job.id])
        self.job = None


class SlurmSteps:
    """One node's ranks: the steps of the run's job on it."""

    def __init__(self, rt: SlurmDocker, node: Node) -> None:
        self.rt = rt
        self.node = node

    async def open(self) -> None:
        await self.rt.login.connect()

    def _files(self, folder: str, rank: int, attempt: int) -> str:
        return f"{folder}/{step_name(rank)}-{attempt}"

    async def _attempts(self, folder: str, rank: int) -> list[int]:
        out = await self.rt.sh(["ls", "-1", folder])
        prefix = f"{step_name(rank)}-"
        return sorted(int(m.group(1)) for name in out.split()
                      if (m := re.fullmatch(re.escape(prefix) + r"(\d+)\.json\.labels", name)))

    async def _state(self, job: Job | None, folder: str, rank: int, attempt: int,
                     labels: dict[str, str]) -> ContainerState:
        base = self._files(folder, rank, attempt)
        out = await self.rt.sh(["sh", "-c", 'cat -- "$1" 2>/dev/null; echo "|"; cat -- "$2" 2>/dev/null',
                                "sparktui-state", f"{base}.exit", f"{base}.cid"])
        exit_text, _, cid = out.partition("|")
        ident = rank_id(job.id if job else "0", rank, attempt)
        name = labels.get("sparktui.container", "")
        if exit_text.strip():
            try:
                ended = json.loads(exit_text)
            except ValueError:
                ended = {}
            return ContainerState(ident, name, "exited", ended.get("exit_code"),
                                  finished_at=ended.get("finished_at"), labels=labels)
        if job is None:
            return ContainerState(ident, name, "dead", labels=labels)
        return ContainerState(ident, name, "running" if cid.strip() else "created", labels=labels)

    async def find(self, labels: dict[str, str]) -> list[ContainerState]:
        slug = labels.get(LABEL_RECIPE)
        if slug is None:
            return []
        found = []
        for job in await self.rt.jobs(slug):
            if not job.folder:
                continue
            rank = self.rt.order.index(self.node.name)
            attempts = await self._attempts(job.folder, rank)
            if not attempts:
                continue
            attempt = attempts[-1]
            meta = json.loads(await self.rt.sh(
                ["cat", "--", f"{self._files(job.folder, rank, attempt)}.json.labels"]))
            if all(meta.get(k) == v for k, v in labels.items()):
                if job.owner == labels.get(LABEL_OWNER):
                    self.rt.job = job
                found.append(await self._state(job, job.folder, rank, attempt, meta))
        return found

    async def run(self, spec: ContainerSpec, extra_labels: dict[str, str]) -> ContainerState:
        run_id = extra_labels.get(LABEL_RUN, "run")
        job = await self.rt.ensure_job(spec, run_id)
        rank = int(spec.labels[LABEL_RANK])
        attempts = await self._attempts(job.folder, rank)
        attempt = (attempts[-1] + 1) if attempts else 1
        base = self._files(job.folder, rank, attempt)
        labels = {**spec.labels, **extra_labels, LABEL_JOB: job.id,
                  "sparktui.container": spec.name}
        named = replace(spec, name=f"{spec.name}-j{job.id}-{attempt}")
        argv, env = docker_cli_args(named, {LABEL_JOB: job.id, **extra_labels})
        step = {"argv": argv, "env": env, "log": f"{base}.log", "exit": f"{base}.exit",
                "cid": f"{base}.cid", "docker": "docker",
                "host": f"unix://{self.node.docker.socket}", "stop_timeout": 10}
        await self.rt.write(f"{base}.json.labels", json.dumps(labels))
        await self.rt.write(f"{base}.json", json.dumps(step))
        srun = step_argv(self.node.name, self.rt.settings, rank, job.id, job.folder, attempt)
        # detached on the login node: the step outlives this SSH session (and sparktui)
        await self.rt.sh(["sh", "-c", 'setsid "$@" </dev/null >/dev/null 2>&1 &', "sparktui-srun",
                          *srun])
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            state = await self._state(job, job.folder, rank, attempt, labels)
            if state.status != "created" or time.monotonic() > deadline:
                return state
            await asyncio.sleep(POLL_S)

    def _parse(self, container_id: str) -> tuple[str, int, int]:
        m = ID.fullmatch(container_id)
        if m is None:
            raise ValueError(f"{container_id!r} is no Slurm rank id")
        return m.group(1), int(m.group(2)), int(m.group(3))

    async def _folder(self, job_id: str) -> tuple[Job | None, str | None]:
        job = self.rt.job if self.rt.job is not None and self.rt.job.id == job_id else \
            await self.rt.job_of(job_id)
        return job, job.folder if job is not None else None

    async def inspect(self, container_id: str) -> ContainerState:
        job_id, rank, attempt = self._parse(container_id)
        job, folder = await self._folder(job_id)
        if folder is None:
            return ContainerState(container_id, "", "missing")
        return await self._state(job, folder, rank, attempt, {})

    async def named(self, name: str) -> ContainerState | None:
        return None  # each attempt's container has a name of its own (job and attempt in it)

    async def stop(self, container_id: str, timeout: float = 10.0) -> None:
        """TERM to the rank's step (its supervisor stops the container), then, if it has not
        ended within ``timeout``, the step is killed (the epilog removes what is left)."""
        job_id, rank, attempt = self._parse(container_id)
        steps = await self.rt.sh(["squeue", "--noheader", "--steps", f"--jobs={job_id}",
                                  "--format=%i|%j"])
        ids = [line.split("|")[0] for line in steps.splitlines()
               if line.endswith(f"|{step_name(rank)}")]
        for step in ids:
            await self.rt.sh(["scancel", "--signal=TERM", step])
        job, folder = await self._folder(job_id)
        deadline = time.monotonic() + timeout + 5
        while folder is not None and time.monotonic() < deadline:
            state = await self._state(job, folder, rank, attempt, {})
            if state.status == "exited":
                return
            await asyncio.sleep(POLL_S)
        for step in ids:
            await self.rt.sh(["scancel", step])

    async def remove(self, container_id: str) -> None:
        """The stopped container goes from its node (a step of its own in the job); the files
        stay with the run."""
        job_id, rank, attempt = self._parse(container_id)
        job, folder = await self._folder(job_id)
        if job is None or folder is None:
            return  # the job ended: its epilog removed the containers
        base = self._files(folder, rank, attempt)
        cid = (await self.rt.sh(["cat", "--", f"{base}.cid"])).strip()
        if cid:
            await self.rt.sh(["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1",
                              f"--nodelist={self.node.name}", "--quiet", "docker",
                              f"--host=unix://{self.node.docker.socket}", "rm", "-f", cid],
                             timeout=60)

    # -- Logs -------------------------------------------------------------------------------
    async def logs(self, container_id: str, cursor: str | None, follow: bool = True,
                   secrets: Sequence[str] = ()) -> AsyncIterator[LogChunk]:
        """The attempt's log file from byte ``cursor`` on, through the login node; ends once
        the exit file is there and the log read to its end (follow), or at its end."""
        job_id, rank, attempt = self._parse(container_id)
        _job, folder = await self._folder(job_id)
        if folder is None:
            return
        base = self._files(folder, rank, attempt)
        offset = int(cursor) if cursor and cursor.isdigit() else 0
        rest = b""
        while True:
            try:
                conn = await self.rt.login.connection()
                # the exit file first: once it is there the log is whole (the supervisor
                # writes it last), so a log read after it misses nothing
                cmd = login_shell_command(["sh", "-c", 'if test -e "$4"; then e=ended; else e=running; fi; '
                                           'tail -c +"$1" -- "$2" 2>/dev/null | head -c "$3"; echo; echo $e',
                                           "sparktui-logs", str(offset + len(rest) + 1),
                                           f"{base}.log", str(CHUNK_BYTES), f"{base}.exit"])
                res = await conn.run(cmd, check=False, encoding=None)
            except (OSError, asyncssh.Error) as exc:
                raise RuntimeLost(f"login: {exc}") from None
            out = res.stdout if isinstance(res.stdout, bytes) else b""
            body, _, status = out.rstrip(b"\n").rpartition(b"\n")
            data = rest + body if status in (b"ended", b"running") else rest
            lines, rest = _lines(data)
            if lines:
                offset += sum(len(raw) + 1 for raw, _ts, _text in lines)
                yield LogChunk([(ts, text) for _raw, ts, text in lines], str(offset))
            ended = status == b"ended"
            if len(body) < CHUNK_BYTES and (ended or not follow):
                if rest and ended:  # a last line without its newline
                    ts, text = _split(rest)
                    offset += len(rest)
                    rest = b""
                    yield LogChunk([(ts, text)], str(offset))
                return
            if len(body) < CHUNK_BYTES:
                await asyncio.sleep(POLL_S)


def _split(raw: bytes) -> tuple[str, str]:
    text = raw.decode("utf-8", "replace")
    ts, sep, rest = text.partition(" ")
    if sep and ts.endswith("Z") and ts[:4].isdigit():
        return ts, rest
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime()), text


def _lines(data: bytes) -> tuple[list[tuple[bytes, str, str]], bytes]:
    """Whole lines of ``data`` (raw, time stamp, text), and what follows the last newline."""
    *whole, rest = data.split(b"\n")
    return [(raw, *_split(raw)) for raw in whole], rest
