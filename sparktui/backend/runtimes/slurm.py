"""The ``slurm`` kind: ranks as steps of one Slurm allocation, asked for, listed and cancelled
through the login node's ``salloc``, ``srun``, ``squeue`` and ``scancel`` over SSH (no Python
client matches Slurm 22.05, and slurmrestd has no step endpoints), each step running the rank's
container on its node's own Docker engine (``agents/slurm_step.py``).

Nothing here holds a rank: the allocation and its steps outlive sparktui as containers do.
Everything is found again from Slurm and the run's folder in the shared folder: the job by its
name (``sparktui.<recipe>``) and comment (owner, plan, folder; ``core.slurmjob.job_comment``), a
rank's attempt by its files there (``rank<N>-<attempt>.cid``, ``.exit``, ``.log``). A rank's
id is ``slurm-<job>-r<rank>-<attempt>``.

Each command on the login node costs a session of its own (about 0.1 s on the test cluster,
and one connection's sessions open one after another), so every operation is one command: a
short POSIX script given its values as arguments (``nodeshell.login_shell_command``: any login
shell reads it literally). Every value in it is a checked cluster-file value, a label sparktui
made or a path built from them. A rank's log is one long-lived command per rank (``tail -F``
from a byte offset), not a poll.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import asyncssh

from sparktui.agents.local_shim import CONTINUED, MAX_LINE_BYTES, LineCutter
from sparktui.backend.findings import Finding
from sparktui.backend.http import Opener
from sparktui.backend.nodeshell import NodeError, SshShell, login_shell_command
from sparktui.backend.runtime import Containers, ContainerState, LogChunk, RuntimeLost
from sparktui.backend.sshaccess import access_problems as ssh_access_problems
from sparktui.backend.sshaccess import login_name
from sparktui.backend.staging import agent_argv
from sparktui.core.cluster import Cluster, Node
from sparktui.core.dockerview import docker_cli_args
from sparktui.core.kinds import kind_of
from sparktui.core.ownership import LABEL_OWNER
from sparktui.core.plan import LABEL_PLAN, LABEL_RANK, LABEL_RECIPE, Plan
from sparktui.core.problems import Problem
from sparktui.core.rankspec import ContainerSpec
from sparktui.core.slurmjob import (
    SLURM,
    STEP_SUPERVISOR,
    SlurmSettings,
    allocation_argv,
    job_name,
    parse_comment,
    step_argv,
    step_name,
)

LABEL_JOB = "sparktui.slurm.job"
"""On every container a step starts: what the job epilog removes when the job ends."""
LABEL_RUN = "sparktui.run"
LABEL_NAME = "sparktui.container"
POLL_S = 0.5
SURVEY_TTL_S = 0.5  # the ranks' ``find`` calls of one attach share one look at Slurm
CHUNK_BYTES = 256 * 1024
START_TIMEOUT_S = 60.0  # the step's container id appears in its folder within this
ID = re.compile(r"slurm-(\d+)-r(\d+)-(\d+)")
SQUEUE = "%i|%T|%r|%N|%L|%u|%V|%k"
"""Job id, state, reason, nodes, time left, user, submitted (UTC: ``TZ=UTC``), comment."""

SUBMIT = """
umask 077 && mkdir -p -m 700 "$1" && cat > "$1/$2" || exit 1
dir=$1; shift 2
setsid "$@" </dev/null >"$dir/salloc.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 1500 ]; do
  if grep -q "job allocation" "$dir/salloc.out" 2>/dev/null; then cat "$dir/salloc.out"; exit 0; fi
  if ! kill -0 $pid 2>/dev/null; then
    cat "$dir/salloc.out"  # salloc --no-shell ends once granted: its last word may be the grant
    grep -q "job allocation" "$dir/salloc.out" 2>/dev/null; exit
  fi
  sleep 0.02; i=$((i+1))
done
cat "$dir/salloc.out"; exit 1
"""
"""The run's folder (private), the supervisor from stdin, then ``salloc`` detached (it waits
there while the partition is busy, and outlives this connection); prints what salloc said
once it names the job (granted or pending), or why not. ``salloc --no-shell`` ends as soon as
it is granted, so its end is read after its last word (CI's loaded lane once saw the grant
written between the two looks and took it for a failure)."""

SURVEY = """
for d in "$@"; do
  printf '@dir %s\\n' "$d"
  for b in "$d"/rank*.json.labels; do
    [ -r "$b" ] || continue
    base=${b%.json.labels}
    [ -e "$base.removed" ] && continue
    printf '@rank %s\\n' "${base##*/}"
    printf '%s\\n' "$(cat -- "$b")" "$(cat -- "$base.exit" 2>/dev/null)" \\
      "$(cat -- "$base.cid" 2>/dev/null)"
  done
done
exit 0
"""
"""Every rank attempt's labels, exit record and container id in each folder given, but those
removed (``down``: their files stay with the run); a folder this user cannot read lists
nothing."""

TAKEN = """
n=0
for b in "$1/$2"-*.json.labels; do
  [ -e "$b" ] || continue
  a=${b%.json.labels}; a=${a##*-}
  case $a in ''|*[!0-9]*) continue ;; esac
  [ "$a" -gt "$n" ] && n=$a
done
echo "$n"
"""
"""The highest attempt number of a rank's step (``$2``) in a run folder, those removed among
them: a process that never saw them (a watch started again, the command line) numbers the next
attempt after every file already there, not after the last one ``find`` lists."""

STATE = """
env TZ=UTC squeue --noheader --states=all --jobs="$2" --format="$3" 2>/dev/null
echo; echo @node
sinfo --noheader --Node --nodes="$4" --format='%T|%E' 2>/dev/null | head -n 1
echo; echo @files
printf '%s\\n' "$(cat -- "$1.exit" 2>/dev/null)" "$(cat -- "$1.cid" 2>/dev/null)"
tail -n 1 -- "$1.log" 2>/dev/null | cut -c 1-40; exit 0
"""
"""A rank attempt's job as ``squeue`` lists it (ended ones too, for a while), its node as
``sinfo`` does (state and reason), then its files and the start of its log's last line (its
time stamp: the last sign of life of a rank whose node was lost)."""

ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "RESIZING",
                    "REQUEUED", "SIGNALING", "STAGE_OUT"})
"""Job states whose steps may still run (or come to)."""
USABLE = ACTIVE - {"COMPLETING", "SIGNALING", "STAGE_OUT"}
"""Job states a new step may start in: one ending (its node set DOWN, cancelled) takes none."""
JOB_TTL_S = 2.0
"""How long the held job's state is taken as known before a step is started in it."""

RUN = """
set -C; umask 077
base=$1; shift
IFS= read -r labels || exit 4
{ printf '%s\\n' "$labels" > "$base.json.labels"; } 2>/dev/null || { echo taken; exit 3; }
cat > "$base.json" || exit 1
setsid "$@" </dev/null >/dev/null 2>&1 &
p=$!
i=0
while [ $i -lt 3000 ]; do
  if [ -e "$base.cid" ] || [ -e "$base.exit" ]; then break; fi
  kill -0 $p 2>/dev/null || break
  sleep 0.02; i=$((i+1))
done
printf '%s\\n' "$(cat -- "$base.exit" 2>/dev/null)" "$(cat -- "$base.cid" 2>/dev/null)"
tail -c 600 -- "$base.srun" 2>/dev/null; exit 0
"""
"""The attempt's labels (refused when the attempt exists: ``set -C``) and spec from stdin, its
step started detached, then its state once the container has an id, the step ended or
``srun`` gave up (what it said follows)."""

STOP = """
job=$1 name=$2 base=$3 wait=$4
ids=$(squeue --noheader --steps --jobs="$job" --format='%i %j' 2>/dev/null |
      while read -r id n; do [ "$n" = "$name" ] && echo "$id"; done)
for s in $ids; do scancel --signal=TERM "$s" 2>/dev/null; done
[ -n "$ids" ] || exit 0
i=0
while [ $i -lt $((wait * 10)) ]; do
  [ -e "$base.exit" ] && exit 0
  sleep 0.1; i=$((i+1))
done
for s in $ids; do scancel "$s" 2>/dev/null; done
exit 0
"""
"""TERM to the rank's step (its supervisor stops the container, then writes the exit record),
then a kill once ``wait`` seconds have passed without one (the job's epilog, or ``remove``,
takes the container). No step left: nothing to wait for."""

REMOVE = """
: > "$1.removed"
cid=$(cat -- "$1.cid" 2>/dev/null) || exit 0
[ -n "$cid" ] || exit 0
[ -n "$2" ] || exit 0
srun --jobid="$2" --overlap --nodes=1 --ntasks=1 --nodelist="$3" --quiet \\
  docker --host="$4" rm -f "$cid" >/dev/null 2>&1
exit 0
"""
"""The attempt marked removed (``find`` no longer lists it), then its container removed from
its node by a step of the job, while the job runs (once it ended, its epilog did that)."""

REST = """
[ -e "$4" ]; e=$?
tail -c +"$1" -- "$2" 2>/dev/null | head -c "$3"
exit $e
"""
"""Up to ``$3`` bytes of a rank's log from byte ``$1`` on; exit 0 when its exit record was
there before the read (the supervisor writes it after the log's last byte: the read then
reaches the end), 1 when not yet."""
REST_WAIT_S = 3.0
"""How long a follower whose ``tail`` ended on its job's end waits for the exit record, the
log still read: the supervisor writes its container's last lines and then the record, while
Slurm already says the job ended (seed 401 at 265 s: a node set DOWN ended the job, and the
last two lines of a rank on another node came after the follower's last read). A lost node's
step never writes one: that rank's log ends after the wait."""

FOLLOW = """
tail -c +"$1" -s 0.2 -F -- "$2" 2>/dev/null &
t=$!
( cat; kill $t $$ ) </dev/stdin >/dev/null 2>&1 &
c=$!
i=0
while [ ! -e "$3" ]; do
  sleep 0.2; i=$((i+1))
  if [ $((i % 10)) -eq 0 ]; then
    s=$(squeue --noheader --jobs="$4" --format=%T 2>&1)
    case "$s" in ""|*"Invalid job id"*) break;; esac
  fi
done
sleep 0.3
kill $t $c 2>/dev/null
exit 0
"""
"""A rank's log from a byte on, as it grows, until its exit record is there (the supervisor
writes that after the log's last byte) or its job has ended (every 2 s: a lost node's step
never writes one); whatever ``tail`` had not sent by then is read after.
Its stdin's end (the channel closed: sparktui stopped following, or its connection dropped)
ends it too, so nothing is left reading on the login node."""


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
    submitted: str = ""  # RFC 3339 UTC

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def job_sentence(job: Job, partition: str) -> str:
    if job.state == "PENDING":
        why = f" ({job.reason})" if job.reason not in ("", "None") else ""
        return f"Slurm job {job.id} pending{why} in partition {partition}"
    left = f", {job.time_left} left" if job.time_left and job.time_left != "INVALID" else ""
    return (f"Slurm job {job.id} {job.state.lower()} on {job.nodes or '?'} "
            f"(partition {partition}){left}")


def parse_jobs(text: str) -> list[Job]:
    jobs = []
    for line in text.splitlines():
        parts = line.split("|", 7)
        if len(parts) != 8 or not parts[0].isdigit():
            continue
        meta = parse_comment(parts[7])
        submitted = parts[6] + "Z" if re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", parts[6]) else ""
        jobs.append(Job(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5],
                        meta.get("owner", ""), meta.get("plan", ""), meta.get("dir", ""),
                        submitted))
    return jobs


@dataclass
class Attempt:
    """One attempt of a rank as the run's folder holds it."""

    labels: dict[str, str]
    exit_text: str = ""
    cid: str = ""


@dataclass
class Folder:
    """A job's run folder: each rank's attempts (numbered from 1)."""

    ranks: dict[int, dict[int, Attempt]] = field(default_factory=dict)

    def latest(self, rank: int) -> tuple[int, Attempt] | None:
        tries = self.ranks.get(rank, {})
        return max(tries.items()) if tries else None


def parse_survey(text: str) -> dict[str, Folder]:
    """``SURVEY``'s output read back."""
    out: dict[str, Folder] = {}
    folder: Folder | None = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("@dir "):
            folder = out.setdefault(line[5:], Folder())
            i += 1
            continue
        m = re.fullmatch(r"@rank rank(\d+)-(\d+)", line)
        if m and folder is not None:
            body = [*lines[i + 1:i + 4], "", "", ""][:3]
            try:
                labels = json.loads(body[0])
            except ValueError:
                labels = None
            if isinstance(labels, dict):
                folder.ranks.setdefault(int(m[1]), {})[int(m[2])] = Attempt(
                    {str(k): str(v) for k, v in labels.items()}, body[1].strip(), body[2].strip())
            i += 4
            continue
        i += 1
    return out


def parse_state(text: str) -> tuple[str, str]:
    """``STATE``'s (and ``RUN``'s) files part: the exit record's text on its first line, the
    container id on its second (either empty while there is none)."""
    lines = [*text.split("\n"), "", ""]
    return lines[0].strip(), lines[1].strip()


def own_allocation(settings: SlurmSettings, purpose: str) -> list[str]:
    """``srun``'s words for a step in an allocation of its own (``sparktui-<purpose>``): the
    staging agent before ``up``, doctor's look at a node."""
    out = [f"--partition={settings.partition}", f"--time={settings.time}",
           f"--job-name=sparktui-{purpose}"]
    if settings.account:
        out.append(f"--account={settings.account}")
    return out


@functools.cache
def _supervisor() -> str:
    """The step supervisor's text, sent to the run's folder at each submit."""
    return resources.files("sparktui.agents").joinpath(STEP_SUPERVISOR).read_text()


def login_node(cluster: Cluster) -> Node:
    """The login node as a node sparktui reaches over SSH (the cluster's ``[ssh]`` settings,
    host key verified as for any node)."""
    settings = cluster.settings
    if not isinstance(settings, SlurmSettings):
        raise ValueError(f"cluster {cluster.name!r} has no [slurm] table")
    host, port = settings.login_host
    first = cluster.nodes[0]
    return Node(index=-1, name="login", host=host, ssh_port=port, fabric_ip=host, hf_cache="/",
                port_offset=0, ssh=first.ssh, docker=first.docker)


def access_problems(cluster: Cluster, nodes: Sequence[Node]) -> list[Problem]:
    """What stops sparktui reaching the login node (the compute nodes are Slurm's)."""
    return ssh_access_problems(cluster, [login_node(cluster)])


def rank_id(job: str, rank: int, attempt: int) -> str:
    return f"slurm-{job}-r{rank}-{attempt}"


def state_of(ident: str, name: str, exit_text: str, cid: str, job: Job | None,
             labels: dict[str, str], node: str = "", last: str = "") -> ContainerState:
    """A rank attempt's state from its files: ended once its exit record is there, or once its
    job has (``job``: as ``squeue`` lists it, None once Slurm has forgotten it; ``node``: what
    ``sinfo`` says of the rank's node, for the sentence; ``last``: its log's last line, whose
    time stamp is when a rank that ended with no exit record was last heard of)."""
    started = job.submitted or None if job is not None else None
    if exit_text:
        try:
            ended = json.loads(exit_text)
        except ValueError:
            ended = {}
        code = ended.get("exit_code") if isinstance(ended, dict) else None
        # an exit because Slurm ended the job (its node set DOWN, the job cancelled) says so
        why_ended = job_end(job, node) if job is None or job.state not in USABLE else None
        return ContainerState(ident, name, "exited", code if isinstance(code, int) else None,
                              finished_at=ended.get("finished_at") if isinstance(ended, dict) else None,
                              labels=labels, started_at=started,
                              lost=why_ended, unstarted=isinstance(ended, dict)
                              and ended.get("error") == "not started")
    if job is None or job.state not in ACTIVE:
        said = job_end(job, node)
        heard = last.split(" ", 1)[0] if last else ""
        return ContainerState(ident, name, "dead", labels=labels, lost=said,
                              finished_at=heard if heard.endswith("Z") else None,
                              started_at=started)
    return ContainerState(ident, name, "running" if cid else "created", labels=labels,
                          started_at=started)


def job_end(job: Job | None, node: str) -> str:
    """``Slurm job 12 ended NODE_FAIL; its node is down (why)``: how the rank's job ended or is
    ending (``node``: ``sinfo``'s ``state|reason`` of the rank's node, when asked)."""
    if job is None:
        said = "its Slurm job ended"
    else:
        verb = f"is {job.state.lower()}" if job.state in ACTIVE else f"ended {job.state}"
        said = f"Slurm job {job.id} {verb}" + (f" ({job.reason})" if job.reason not in ("", "None")
                                                else "")
    state, _, why = node.partition("|")
    if state:
        said += f"; its node is {state.lower()}" + (f" ({why})" if why and why != "none" else "")
    return said


class SlurmDocker:
    """One SSH connection to the login node; one ``SlurmSteps`` per node of the plan's ranks.
    Probes go from the login node to the rank's address (``NodeProbe``); one rank is replaced
    in the allocation (``RestartOne``); the staging agent runs as a step (``Stage``); the job
    is shown (``Scheduled``) and waited for (``Allocation``)."""

    def __init__(self, cluster: Cluster, nodes: list[Node], state_root: Path) -> None:
        self.kind = kind_of(SLURM)
        settings = cluster.settings
        if not isinstance(settings, SlurmSettings):
            raise ValueError(f"cluster {cluster.name!r} has no [slurm] table")
        self.settings = settings
        self.cluster = cluster
        self.login_node = login_node(cluster)
        self.login = SshShell(self.login_node)
        self.user = login_name(self.login_node) or ""
        self.nodes = {n.name: n for n in nodes}
        self.order = [n.name for n in nodes]
        self.steps = {n.name: SlurmSteps(self, n) for n in nodes}
        self._job_lock = asyncio.Lock()
        self._job_seen = 0.0  # when the held job's state was last asked of Slurm
        self.job: Job | None = None
        self._survey: tuple[float, str, asyncio.Task[list[tuple[Job, Folder | None]]]] | None = None
        self.folders: dict[str, str] = {}
        """Job id -> its run folder, for every job of this operator's seen: the folder (its
        logs, exit records) outlives the job."""

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

    # -- Stage ------------------------------------------------------------------------------
    async def run_agent(self, node: str, spec: dict[str, Any], on_line: Callable[[str], None],
                        stdin: str) -> int:
        """The staging agent as a step on ``node``, its stdin through ``srun``: inside the
        run's job when there is one (``--overlap``), else in an allocation of its own for the
        length of the step (queued like any job while the partition is busy)."""
        argv = ["srun", *self._place("stage"), "--nodes=1", "--ntasks=1", f"--nodelist={node}",
                "--kill-on-bad-exit=0", "--quiet", *agent_argv(spec, self.settings.python)]
        return await self.login.stream(argv, on_line, stdin=stdin)

    def _place(self, purpose: str, immediate: bool = False) -> list[str]:
        """Where a step of sparktui's own goes: into the run's job while it runs
        (``--overlap``), else into an allocation of its own for the step's length, queued like
        any job while the partition is busy (``immediate``: granted within 10 s or not at
        all)."""
        if self.job is not None and self.job.running:
            return [f"--jobid={self.job.id}", "--overlap"]
        return [*own_allocation(self.settings, purpose), *(["--immediate=10"] if immediate else [])]

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
        rc = await asyncio.wait_for(self.login.stream(argv, lines.append, stdin=stdin), timeout)
        if rc != 0:
            raise NodeError("login", f"{argv[0]} exited {rc}: {' | '.join(lines)[-500:]}")
        return "\n".join(lines)

    async def script(self, text: str, *args: str, timeout: float = 30.0,
                     stdin: str | None = None) -> str:
        """One of this module's scripts on the login node, ``args`` as its ``$1``...."""
        return await self.sh(["sh", "-c", text, "sparktui", *args], timeout=timeout, stdin=stdin)

    async def scancel(self, *args: str) -> None:
        """``scancel``; a job or step that has already ended is not an error (``scancel``
        signals a step, then fails to find it once it ended of the signal)."""
        res = await self.login.run(["scancel", *args])
        said = (res.stderr or res.stdout).strip()
        if not res.ok and "Invalid job id specified" not in said:
            raise NodeError("login", f"scancel exited {res.returncode}: {said[-500:]}")

    async def jobs(self, slug: str) -> list[Job]:
        """Every user's jobs of this recipe (another user's is shown as theirs), those that
        ended too while Slurm still lists them (``MinJobAge``, 300 s by default): a rank whose
        job ended under it is found, and said so."""
        out = await self.sh(["env", "TZ=UTC", "squeue", "--noheader", "--states=all",
                             f"--name={job_name(slug)}", f"--format={SQUEUE}"])
        return parse_jobs(out)

    async def job_of(self, job_id: str) -> Job | None:
        """The job while it is pending or running; None once it ended."""
        res = await self.login.run(["env", "TZ=UTC", "squeue", "--noheader", f"--jobs={job_id}",
                                    f"--format={SQUEUE}"])
        if not res.ok and "Invalid job id" not in res.stderr:
            raise NodeError("login", f"squeue exited {res.returncode}: {res.stderr.strip()[-300:]}")
        found = [j for j in parse_jobs(res.stdout) if j.id == job_id and j.state in ACTIVE]
        return found[0] if found else None

    def mine(self, job: Job) -> bool:
        """This operator's job: their Slurm user and their owner name in its comment."""
        return job.user == self.user and job.owner == self.cluster.owner

    async def survey(self, slug: str) -> list[tuple[Job, Folder | None]]:
        """The recipe's jobs and, for this operator's, their run folder: one look shared by the
        ranks' ``find`` calls of an attach."""
        now = time.monotonic()
        if self._survey is not None:
            at, of, task = self._survey
            if of == slug and (not task.done() or now - at < SURVEY_TTL_S):
                return await task
        task = asyncio.ensure_future(self._look(slug))
        self._survey = (now, slug, task)
        return await task

    async def _look(self, slug: str) -> list[tuple[Job, Folder | None]]:
        listed = await self.jobs(slug)
        mine = [j for j in listed if self.mine(j) and j.folder]
        self.folders.update((j.id, j.folder) for j in mine)
        # this operator's newest job is their run (a running one first); older ones Slurm
        # still lists are history, as a container replaced on a node is
        mine.sort(key=lambda j: (j.state in ACTIVE, int(j.id)))
        jobs = [*mine[-1:], *(j for j in listed if not self.mine(j))]
        folders = parse_survey(await self.script(SURVEY, mine[-1].folder)) if mine else {}
        return [(j, folders.get(j.folder) if self.mine(j) else None) for j in jobs]

    # -- Preflight ------------------------------------------------------------------------
    async def preflight(self, node: Node, image: str, slug: str) -> tuple[list[Finding], str | None]:
        """Doctor's Slurm lines for a node: its state in the partition (``sinfo``), then its
        Docker engine and the image, asked by a step on it: inside the run's job when there is
        one, else an allocation of its own granted within 10 s or not at all (a busy node is
        said to be busy, not waited for)."""
        res = await self.login.run(["sinfo", "--noheader", "--Node", f"--nodes={node.name}",
                                    f"--partition={self.settings.partition}", "--format=%T|%E"])
        state, _, why = res.stdout.strip().partition("\n")[0].partition("|")
        if not res.ok or not state:
            said = (res.stderr or res.stdout).strip()[-300:] or "not listed"
            return [Finding(node.name, "slurm", "failed", f"not in partition "
                                                          f"{self.settings.partition}: {said}")], None
        usable = state.rstrip("*~#!%$@^-") in ("idle", "mixed", "allocated", "completing")
        shown = state + (f" ({why})" if why and why != "none" else "")
        found = [Finding(node.name, "slurm", "passed" if usable else "failed",
                         f"{shown} in partition {self.settings.partition}")]
        if not usable:
            return found, None
        fmt = "{{.Id}}"
        step = await self.login.run(
            ["srun", *self._place("doctor", immediate=True), "--nodes=1", "--ntasks=1",
             f"--nodelist={node.name}", "--quiet",
             "sh", "-c", 'docker --host="$1" version --format "{{.Server.Version}}" && '
                         'docker --host="$1" image inspect --format "$3" "$2" 2>/dev/null; exit 0',
             "sparktui-doctor", f"unix://{node.docker.socket}", image, fmt], timeout=60)
        lines = step.stdout.split()
        if not step.ok or not lines:
            said = (step.stderr or step.stdout).strip()[-300:]
            found.append(Finding(node.name, "docker", "failed",
                                 f"no step ran on it to ask its Docker engine: {said}"))
            return found, None
        found.append(Finding(node.name, "docker", "passed",
                             f"Docker {lines[0]} at {node.docker.socket} (asked by a Slurm step)"))
        image_id = lines[1] if len(lines) > 1 and lines[1].startswith("sha256:") else None
        if image_id is None:
            found.append(Finding(node.name, "image", "failed",
                                 f"image {image} is not on this node; load it there (image sync "
                                 "needs each node's Docker engine over SSH)"))
        else:
            found.append(Finding(node.name, "image", "passed", f"{image} is {image_id[7:19]}"))
        return found, image_id

    # -- Scheduled --------------------------------------------------------------------------
    async def allocation(self) -> str | None:
        """``Slurm job 12 running on node[0-3] (partition spark), 1:58:10 left``, or why it
        waits; None when this operator holds no job of the run."""
        job = self.job  # a restart or a release may replace it while squeue answers
        if job is None:
            return None
        now = await self.job_of(job.id)
        if now is None:
            return f"Slurm job {job.id} ended"
        if self.job is job and (job.running or not now.running):
            self.job = replace(now, folder=now.folder or job.folder)
        return job_sentence(now, self.settings.partition)

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
            plan = spec.labels.get(LABEL_PLAN, "")
            slug = spec.labels[LABEL_RECIPE]
            if self.job is not None and time.monotonic() - self._job_seen > JOB_TTL_S:
                # held since long ago: it may be ending (a node set DOWN ends the allocation,
                # and a group restarted then must ask for a new one, not start steps in it)
                now = await self.job_of(self.job.id)
                self.job = (replace(now, folder=now.folder or self.job.folder)
                            if now is not None and now.state in USABLE else None)
            if self.job is None:
                mine = [j for j, _ in await self.survey(slug)
                        if self.mine(j) and j.plan == plan and j.state in USABLE]
                self.job = mine[-1] if mine else await self._submit(slug, plan, run_id)
            self._job_seen = time.monotonic()
            pause = 0.05
            while not self.job.running:
                why = job_sentence(self.job, self.settings.partition)
                if waiting is not None and why != said:
                    waiting(why)
                    said = why
                now = await self.job_of(self.job.id)
                if now is None:
                    job, self.job = self.job, None
                    raise NodeError("login", f"Slurm job {job.id} ended before it ran "
                                             f"(last state {job.state}, reason {job.reason})")
                self.job = now
                self._job_seen = time.monotonic()
                if not now.running:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, POLL_S)  # granted at once, or a wait on the scheduler
            return self.job

    async def _submit(self, slug: str, plan: str, run_id: str) -> Job:
        """The run's folder, the step supervisor in it, and the allocation asked for, in one
        command (``SUBMIT``)."""
        folder = f"{self.settings.shared_dir}/{run_id}-{secrets.token_hex(3)}"
        owner = self.cluster.owner
        argv = allocation_argv(slug, self.order, owner, plan, self.settings, folder)
        supervisor = await asyncio.to_thread(_supervisor)
        out = await self.script(SUBMIT, folder, STEP_SUPERVISOR, *argv, stdin=supervisor,
                                timeout=60)
        found = re.search(r"job allocation (\d+)", out)
        if found is None:
            raise NodeError("login", f"salloc said {out.strip()[-300:]!r}, not a job id")
        self.folders[found[1]] = folder
        granted = "Granted job allocation" in out
        return Job(found[1], "RUNNING" if granted else "PENDING", "", "", "", self.user, owner,
                   plan, folder)

    async def cancel(self) -> None:
        """The job ends: its steps get TERM first (their containers stop), then the job."""
        if self.job is None:
            return
        await self.scancel("--signal=TERM", "--full", self.job.id)
        await self.scancel(self.job.id)
        self.job = None


class SlurmSteps:
    """One node's ranks: the steps of the run's job on it."""

    def __init__(self, rt: SlurmDocker, node: Node) -> None:
        self.rt = rt
        self.node = node
        self.attempts: dict[tuple[str, int], int] = {}  # (job, rank) -> the last attempt seen

    async def open(self) -> None:
        await self.rt.login.connect()

    @staticmethod
    def _files(folder: str, rank: int, attempt: int) -> str:
        return f"{folder}/{step_name(rank)}-{attempt}"

    async def find(self, labels: dict[str, str]) -> list[ContainerState]:
        slug = labels.get(LABEL_RECIPE)
        if slug is None or LABEL_RANK not in labels:
            return []
        rank = int(labels[LABEL_RANK])
        found = []
        for job, folder in await self.rt.survey(slug):
            if folder is None:  # another operator's: what Slurm says of it is all there is
                if not self.rt.mine(job) and job.state in ACTIVE:
                    found.append(self._theirs(job, rank, labels))
                continue
            latest = folder.latest(rank)
            if latest is None:
                if job.state == "PENDING":  # asked for, not given yet: its ranks wait
                    self.rt.job = self.rt.job or job
                    found.append(ContainerState(rank_id(job.id, rank, 0), "", "created",
                                                labels={**labels, LABEL_OWNER: job.owner},
                                                queued=job_sentence(job, self.rt.settings.partition)))
                continue
            attempt, files = latest
            self.attempts[(job.id, rank)] = max(attempt, self.attempts.get((job.id, rank), 0))
            if all(files.labels.get(k) == v for k, v in labels.items()):
                if job.state in ACTIVE and (self.rt.job is None or self.rt.job.id == job.id):
                    self.rt.job = job  # this operator's allocation: restart and down use it
                found.append(state_of(rank_id(job.id, rank, attempt),
                                      files.labels.get(LABEL_NAME, ""), files.exit_text,
                                      files.cid, job, files.labels))
        return found

    def _theirs(self, job: Job, rank: int, labels: dict[str, str]) -> ContainerState:
        who = f"{job.owner or 'someone'} (Slurm user {job.user}, job {job.id})"
        return ContainerState(rank_id(job.id, rank, 0), job_name(labels[LABEL_RECIPE]),
                              "running" if job.running else "created",
                              labels={**labels, LABEL_OWNER: who, LABEL_JOB: job.id},
                              created_at=job.submitted or None)

    async def run(self, spec: ContainerSpec, extra_labels: dict[str, str]) -> ContainerState:
        run_id = extra_labels.get(LABEL_RUN, "run")
        job = await self.rt.ensure_job(spec, run_id)
        rank = int(spec.labels[LABEL_RANK])
        labels = {**spec.labels, **extra_labels, LABEL_JOB: job.id, LABEL_NAME: spec.name}
        for _ in range(3):
            attempt = self.attempts.get((job.id, rank), 0) + 1
            self.attempts[(job.id, rank)] = attempt
            base = self._files(job.folder, rank, attempt)
            named = replace(spec, name=f"{spec.name}-j{job.id}-{attempt}")
            argv, env = docker_cli_args(named, {LABEL_JOB: job.id, **extra_labels})
            step = {"argv": argv, "env": env, "log": f"{base}.log", "exit": f"{base}.exit",
                    "cid": f"{base}.cid", "docker": "docker",
                    "host": f"unix://{self.node.docker.socket}", "stop_timeout": 10}
            srun = step_argv(self.node.name, self.rt.settings, rank, job.id, job.folder, attempt)
            payload = json.dumps(labels) + "\n" + json.dumps(step)
            try:
                out = await self.rt.script(RUN, base, *srun, stdin=payload,
                                           timeout=START_TIMEOUT_S + 10)
            except NodeError as exc:
                if "taken" not in str(exc):
                    raise
                await self._recount(job, rank)  # an attempt this process did not know of
                continue
            exit_text, cid = parse_state(out)
            if not exit_text and not cid:
                said = " ".join(out.split("\n", 2)[2:]).strip() or "no word from srun"
                raise NodeError("login", f"rank {rank}'s step did not start in job {job.id}: "
                                         f"{said[-400:]}")
            return state_of(rank_id(job.id, rank, attempt), spec.name, exit_text, cid, job,
                            labels)
        raise NodeError("login", f"rank {rank}: no free attempt number in {job.folder}")

    async def _recount(self, job: Job, rank: int) -> None:
        said = (await self.rt.script(TAKEN, job.folder, step_name(rank))).strip()
        if said.isdigit():
            self.attempts[(job.id, rank)] = max(int(said), self.attempts.get((job.id, rank), 0))

    def _parse(self, container_id: str) -> tuple[str, int, int]:
        m = ID.fullmatch(container_id)
        if m is None:
            raise ValueError(f"{container_id!r} is no Slurm rank id")
        return m.group(1), int(m.group(2)), int(m.group(3))

    def _held(self, job_id: str) -> Job | None:
        """The job, while this process holds it as the run's allocation."""
        return self.rt.job if self.rt.job is not None and self.rt.job.id == job_id else None

    async def _job(self, job_id: str) -> Job | None:
        """The job while it is pending or running."""
        return self._held(job_id) or await self.rt.job_of(job_id)

    async def _folder(self, job_id: str) -> tuple[Job | None, str | None]:
        """The job this process holds (None: it holds another, or none) and the job's run
        folder: known from an earlier look, else asked of Slurm (None once it forgot the job)."""
        held = self._held(job_id)
        if held is not None:
            return held, held.folder
        if job_id in self.rt.folders:
            return None, self.rt.folders[job_id]
        job = await self.rt.job_of(job_id)
        return None, job.folder if job is not None and job.folder else None

    async def inspect(self, container_id: str) -> ContainerState:
        job_id, rank, attempt = self._parse(container_id)
        held, folder = await self._folder(job_id)
        if folder is None:
            return ContainerState(container_id, "", "missing")
        out = await self.rt.script(STATE, self._files(folder, rank, attempt), job_id, SQUEUE,
                                   self.node.name)
        listed, _, rest = out.partition("\n@node\n")
        node, _, files = rest.partition("\n@files\n")
        jobs = [j for j in parse_jobs(listed) if j.id == job_id]
        job = jobs[0] if jobs else None
        if (job is None or job.state not in ACTIVE) and held is not None:
            self.rt.job = None  # the allocation ended under this process
        exit_text, cid = parse_state(files)
        last = ([*files.split("\n"), "", "", ""])[2]
        return state_of(container_id, "", exit_text, cid, job, {}, node.strip(), last.strip())

    async def named(self, name: str) -> ContainerState | None:
        return None  # each attempt's container has a name of its own (job and attempt in it)

    async def stop(self, container_id: str, timeout: float = 10.0) -> None:
        """TERM to the rank's step (its supervisor stops the container), then, if it has not
        ended within ``timeout``, the step is killed (``STOP``)."""
        job_id, rank, attempt = self._parse(container_id)
        job = await self._job(job_id)
        if job is None:
            return  # the job ended: its epilog removed the containers
        await self.rt.script(STOP, job_id, step_name(rank), self._files(job.folder, rank, attempt),
                             str(int(timeout) + 5), timeout=timeout + 30)

    async def remove(self, container_id: str) -> None:
        """The stopped container goes from its node (a step of its own in the job); the files
        stay with the run, marked removed."""
        job_id, rank, attempt = self._parse(container_id)
        held, folder = await self._folder(job_id)
        if folder is None:
            return
        await self.rt.script(REMOVE, self._files(folder, rank, attempt),
                             job_id if held is not None else "", self.node.name,
                             f"unix://{self.node.docker.socket}", timeout=90)

    # -- Logs -------------------------------------------------------------------------------
    async def logs(self, container_id: str, cursor: str | None, follow: bool = True,
                   secrets: Sequence[str] = ()) -> AsyncIterator[LogChunk]:
        """The attempt's log file from byte ``cursor`` on, through the login node: followed by
        one long-lived ``tail`` (``FOLLOW``) until the exit record is there, then read to its
        end; without ``follow``, read to its end. The cursor is the byte after the last whole
        line handed over."""
        job_id, rank, attempt = self._parse(container_id)
        _held, folder = await self._folder(job_id)
        if folder is None:
            return
        base = self._files(folder, rank, attempt)
        reader = _Lines(cursor, secrets)
        try:
            conn = await self.rt.login.connection()
            if follow:
                cmd = login_shell_command(["sh", "-c", FOLLOW, "sparktui", str(reader.read + 1),
                                           f"{base}.log", f"{base}.exit", job_id])
                proc = await conn.create_process(cmd, encoding=None)
                try:
                    while True:
                        data = await proc.stdout.read(CHUNK_BYTES)
                        if not data:
                            break
                        chunk = reader.feed(data)
                        if chunk is not None:
                            yield chunk
                finally:
                    proc.close()  # not awaited: a follower that stops does not wait on the node
            give_up = time.monotonic() + (REST_WAIT_S if follow else 0.0)
            while True:  # the rest, to the end of the file (once its exit record is there)
                cmd = login_shell_command(["sh", "-c", REST, "sparktui", str(reader.read + 1),
                                           f"{base}.log", str(CHUNK_BYTES), f"{base}.exit"])
                res = await conn.run(cmd, check=False, encoding=None)
                data = res.stdout if isinstance(res.stdout, bytes) else b""
                chunk = reader.feed(data)
                if chunk is not None:
                    yield chunk
                if len(data) >= CHUNK_BYTES:
                    continue
                if res.exit_status == 0 or time.monotonic() >= give_up:
                    break
                await asyncio.sleep(0.2)
        except (OSError, asyncssh.Error) as exc:
            raise RuntimeLost(f"login: {exc}") from None
        last = reader.close()
        if last is not None:
            yield last


class _Lines:
    """Bytes of a rank's log from a cursor on -> chunks of lines, each with the cursor after it.
    A line longer than ``MAX_LINE_BYTES`` is handed over in pieces as the Docker pump hands it
    (``LineCutter``: never inside a secret, each piece after the first marked), so one line
    without an end holds a piece of memory, not its length. The cursor is the byte after what
    was handed over; inside a cut line it carries ``+<time stamp>``, so a resume there goes on
    with the line's pieces and its time stamp."""

    def __init__(self, cursor: str | None, secrets: Sequence[str]) -> None:
        offset, cont, ts = (cursor or "0").partition("+")
        self.fed = int(offset) if offset.isdigit() else 0  # bytes read from the file
        self.cutter = LineCutter(MAX_LINE_BYTES, (v.encode("utf-8", "surrogateescape")
                                                  for v in secrets))
        self.cutter.continued = bool(cont)
        self.ts = ts

    @property
    def read(self) -> int:
        return self.fed

    def feed(self, data: bytes) -> LogChunk | None:
        self.fed += len(data)
        return self._chunk(self.cutter.feed(data))

    def close(self) -> LogChunk | None:
        """A last line without its newline (the file is whole: its exit record is there)."""
        return self._chunk(self.cutter.close())

    def _chunk(self, texts: list[str]) -> LogChunk | None:
        if not texts:
            return None
        lines = []
        for text in texts:
            if text.startswith(CONTINUED):  # a piece of the line before: its time stamp
                lines.append((self.ts or _now(), text))
            else:
                self.ts, body = _split(text)
                lines.append((self.ts, body))
        handed = self.fed - len(self.cutter.pending)
        return LogChunk(lines, f"{handed}+{self.ts}" if self.cutter.continued else str(handed))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())


def _split(text: str) -> tuple[str, str]:
    """A log line's time stamp (Docker's, or the supervisor's) and its text."""
    ts, sep, rest = text.partition(" ")
    if sep and ts.endswith("Z") and ts[:4].isdigit():
        return ts, rest
    return _now(), text
