"""The Slurm kind's pure half: its cluster-file table (``[slurm]``), the allocation, and the
step that runs each rank's container inside it.

One allocation per run holds every node of the plan (``--nodelist``: rank N runs on the plan's
node N, so the plan's flags, head address included, are the ones that run); it runs nothing of
its own. Each rank is a step sparktui starts into that allocation from the login node (``srun
--jobid``), named ``rank<N>``, running the step supervisor (``backend/runtimes/slurm_step.py``)
with the rank's spec: so one rank is replaced by a new step while the others run on, and the
group by new steps in the same allocation (a requeue waits about 120 s and may revoke the job's
credential). Everything here is text for the login node's shell: every value is checked to hold
only safe characters and quoted besides.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Sequence
from typing import Annotated, Protocol

from pydantic import AfterValidator, Field, field_validator

from sparktui.core.nodevalues import unsafe_sentence
from sparktui.core.validation import StrictModel

SLURM = "slurm"
JOB_PREFIX = "sparktui."
"""Jobs are named ``sparktui.<recipe slug>``: how ``find`` tells a recipe's job from others."""
STEP_PREFIX = "rank"
STEP_SUPERVISOR = "slurm_step.py"
"""The supervisor's file name in the job's folder (written there before the first step)."""
SLURM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_TIME = re.compile(r"(?:\d{1,4}-)?\d{1,6}(?::\d{1,2}){0,2}|UNLIMITED|INFINITE")


def _safe(value: str) -> str:
    why = unsafe_sentence(value)
    if why is not None:
        raise ValueError(why)
    return value


def _folder(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"{value[:200]!r} must be an absolute path: the login node and every "
                         "compute node see the folder at this same path")
    return _safe(value.rstrip("/") or "/")


SafeFolder = Annotated[str, AfterValidator(_folder)]


class SlurmSettings(StrictModel):
    """``[slurm]``: where the scheduler is reached and what the job asks for. The login node is
    reached over SSH with the cluster's ``[ssh]`` settings (host keys verified as for any
    node); the ranks' containers run on the allocated nodes' own Docker engines."""

    login: str = Field(description='The login node, "host" or "host:port": where sbatch, srun, '
                                   "squeue and scancel run")
    partition: str = Field(pattern=SLURM_NAME, max_length=128, description="sbatch --partition")
    account: str | None = Field(default=None, pattern=SLURM_NAME, max_length=128,
                                description="sbatch --account (default: the user's own)")
    time: str = Field(default="1-00:00:00",
                      description='The allocation\'s time limit, as sbatch --time takes it '
                                  '("30", "4:00:00", "1-00:00:00")')
    gpus_per_node: int = Field(default=0, ge=0, le=64,
                               description="GPUs asked of each node (--gres=gpu:N); 0: none")
    shared_dir: SafeFolder = Field(
        description="A folder the login node and every compute node see at this path: each "
                    "run's job script, step supervisor and per-rank output go there")
    python: SafeFolder = Field(default="/usr/bin/python3",
                               description="Python 3 on the compute nodes (runs each step's "
                                           "supervisor)")

    @field_validator("login")
    @classmethod
    def _login(cls, value: str) -> str:
        addr, _, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "22")
        if not addr or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", addr):
            raise ValueError(f"{value[:200]!r} is not a host name or address")
        if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(f"port {port!r} is not a TCP port (1-65535)")
        return value

    @field_validator("time")
    @classmethod
    def _time(cls, value: str) -> str:
        if not _TIME.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is no Slurm time limit: write minutes (\"90\"), "
                             "\"H:MM:SS\" or \"D-HH:MM:SS\"")
        return value

    @property
    def login_host(self) -> tuple[str, int]:
        if self.login.count(":") == 1:
            host, port = self.login.split(":")
            return host, int(port)
        return self.login, 22


def job_name(slug: str) -> str:
    return f"{JOB_PREFIX}{slug}"


def step_name(rank: int) -> str:
    return f"{STEP_PREFIX}{rank}"


def job_comment(owner: str, plan_hash: str, folder: str) -> str:
    """What the job carries for whoever lists it (``squeue %k``): whose it is, which plan, and
    its folder. Every part holds only safe characters, so it needs no quoting."""
    return f"sparktui:owner={owner},plan={plan_hash},dir={folder}"


def parse_comment(comment: str) -> dict[str, str]:
    """``job_comment`` read back; {} for a job sparktui did not submit."""
    if not comment.startswith("sparktui:"):
        return {}
    pairs = (part.partition("=") for part in comment.removeprefix("sparktui:").split(","))
    return {k: v for k, _, v in pairs if k in ("owner", "plan", "dir") and v}


def allocation_argv(slug: str, nodes: list[str], owner: str, plan_hash: str,
                    settings: SlurmSettings, folder: str) -> list[str]:
    """The allocation: the plan's nodes, one task each, held with no shell until cancelled (the
    ranks are steps started into it). An interactive allocation (``salloc``) is granted within
    the request (10 ms on the test cluster) where a batch job waits for the scheduler's next
    pass (0.9 s there): the launch's largest cost. ``folder``: the run's folder in
    ``shared_dir``, carried in the job's comment."""
    argv = [
        "salloc", "--no-shell", f"--job-name={job_name(slug)}",
        f"--partition={settings.partition}",
    ]
    if settings.account:
        argv.append(f"--account={settings.account}")
    argv += [
        f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}", "--ntasks-per-node=1",
        f"--time={settings.time}", f"--comment={job_comment(owner, plan_hash, folder)}",
    ]
    if settings.gpus_per_node:
        argv.append(f"--gres=gpu:{settings.gpus_per_node}")
    return argv


def shown(argv: list[str]) -> str:
    """A command as a shell takes it, each option on a line of its own (and the program an
    option list ends with)."""
    lines = [shlex.quote(argv[0])]
    for prev, word in itertools.pairwise(argv):
        if word.startswith("--") or prev.startswith("--"):
            lines.append(shlex.quote(word))
        else:
            lines[-1] += " " + shlex.quote(word)
    return " \\\n    ".join(lines)


def step_argv(node: str, settings: SlurmSettings, rank: int, job_id: str, folder: str,
              attempt: int) -> list[str]:
    """``srun`` starting rank ``rank``'s step into job ``job_id`` on its node: the supervisor
    with the rank's spec file (``<folder>/rank<N>-<attempt>.json``), which runs the container
    and writes its output, time-stamped, to ``<folder>/rank<N>-<attempt>.log``."""
    base = f"{folder}/{step_name(rank)}-{attempt}"
    return [
        "srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1",
        f"--nodelist={node}", f"--job-name={step_name(rank)}",
        f"--output={base}.srun", "--kill-on-bad-exit=0", "--quiet",
        settings.python, "-I", f"{folder}/{STEP_SUPERVISOR}", f"{base}.json",
    ]


class _Rank(Protocol):
    @property
    def rank(self) -> int: ...
    @property
    def node(self) -> str: ...


class _Plan(Protocol):
    """What ``views`` reads of a ``core.plan.Plan`` (this module is below the plan and the
    cluster: ``core.kinds`` names the Slurm kind, and both import it)."""

    @property
    def recipe_slug(self) -> str: ...
    @property
    def plan_hash(self) -> str: ...
    @property
    def ranks(self) -> Sequence[_Rank]: ...


class _Cluster(Protocol):
    @property
    def owner(self) -> str: ...
    @property
    def settings(self) -> object: ...


def views(plan: _Plan, cluster: _Cluster) -> list[tuple[str, str]]:
    """What the plan view shows of the job: the script and each rank's step, with the job's id
    and folder as ``sbatch`` will give them (``$SLURM_JOB_ID``, ``<shared_dir>/<job folder>``)."""
    settings = cluster.settings
    if not isinstance(settings, SlurmSettings):
        return []
    folder = f"{settings.shared_dir}/<run>"
    argv = allocation_argv(plan.recipe_slug, [r.node for r in plan.ranks], cluster.owner,
                           plan.plan_hash, settings, folder)
    out = [(f"allocation (on the login node {settings.login})", shown(argv))]
    for r in plan.ranks:
        step = step_argv(r.node, settings, r.rank, "$SLURM_JOB_ID", folder, 1)
        out.append((f"rank {r.rank} step", shown(step)))
    return out
