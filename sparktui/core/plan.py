"""The plan: a recipe on a cluster, fully resolved, for every rank.

Pure and deterministic. Its hash is written on every container as a label so a later
sparktui can tell whether what runs still matches the recipe on disk.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sparktui.core.cluster import LOCAL_HEAD, Cluster, Node
from sparktui.core.dockerview import docker_run_line
from sparktui.core.engines import FATAL_LINES, Launch, engine
from sparktui.core.kinds import kind_of
from sparktui.core.ownership import LABEL_OWNER
from sparktui.core.placeholders import substitute
from sparktui.core.rankspec import ContainerSpec, DockerOptions, MountSpec
from sparktui.core.recipe import HF_CACHE_IN_CONTAINER, CheckSpec, Recipe
from sparktui.core.redact import Redactor
from sparktui.core.secrets import Conceal, SecretRules, keyed, masked
from sparktui.core.units import parse_size

STALL_S = 120.0  # [boot] stall's default
METRICS_INTERVAL_S = 5.0  # [metrics] interval's default

LABEL_PREFIX = "sparktui."
LABEL_RECIPE = "sparktui.recipe"
LABEL_RANK = "sparktui.rank"
LABEL_WORLD = "sparktui.world"
LABEL_CLUSTER = "sparktui.cluster"
LABEL_PLAN = "sparktui.plan"


@dataclass(frozen=True)
class RankPlan:
    rank: int
    node: str
    host: str
    port: int
    container: ContainerSpec
    serves_http: bool = True  # False: a headless worker that opens no port (nothing to probe)

    def docker_run(self, show_secrets: bool = False, conceal: Conceal | None = None) -> str:
        """The rank as Docker runs it (``core.dockerview``): in the plan, for every kind."""
        return docker_run_line(self.container, show_secrets=show_secrets, conceal=conceal)

    def to_json(self, show_secrets: bool = False, conceal: Conceal | None = None) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "node": self.node,
            "host": self.host,
            "port": self.port,
            "container": self.container.to_json(show_secrets, conceal),
            "docker_run": self.docker_run(show_secrets, conceal),
            "serves_http": self.serves_http,
        }


@dataclass(frozen=True)
class StagingPlan:
    """One staging job on one node: the ranks it hosts decide which row slices it writes."""

    node: str
    ranks: list[int]
    world: int
    id: str
    kind: str
    src: str
    dst: str
    min_free_bytes: int
    tensors: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CheckPlan:
    pattern: str
    ranks: str | list[int]

    def applies_to(self, rank: int) -> bool:
        return self.ranks in ("any", "all") or (isinstance(self.ranks, list) and rank in self.ranks)


@dataclass(frozen=True)
class BootPlan:
    ready: str
    ready_ranks: list[int]
    timeout_s: float
    must_show: list[CheckPlan]
    must_not_show: list[str]
    args: str = "check"  # [boot] args: "check", "warn" or "ignore"
    args_expected: list[str] = field(default_factory=list)
    stall_s: float = STALL_S  # [boot] stall

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ready": self.ready,
            "ready_ranks": self.ready_ranks,
            "timeout_s": self.timeout_s,
            "must_show": [asdict(c) for c in self.must_show],
            "must_not_show": self.must_not_show,
        }
        # written when set, so the hash of a plan that leaves them alone stays what it was
        if self.args != "check":
            out["args"] = self.args
        if self.args_expected:
            out["args_expected"] = self.args_expected
        if self.stall_s != STALL_S:
            out["stall_s"] = self.stall_s
        return out


@dataclass(frozen=True)
class LivenessPlan:
    """The recipe's ``[liveness]`` canary, resolved: what the backend's canary loop sends."""

    every_s: float
    timeout_s: float
    max_tokens: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MemoryPlan:
    """The recipe's ``[memory]`` guard, resolved to bytes and seconds (``limit`` is in each
    rank's container, as it changes what runs)."""

    floor: int
    stop_at: int | None
    restart_margin: int
    restart_wait_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MetricsPlan:
    """The recipe's ``[metrics]``: how often every rank that serves them is scraped (None:
    off)."""

    interval_s: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Plan:
    recipe_name: str
    recipe_slug: str
    recipe_path: str | None
    engine: str
    model: str
    served_model_name: str
    port: int
    cluster_name: str
    cluster_kind: str  # a key of ``core.kinds.KINDS``
    ranks: list[RankPlan]
    staging: list[StagingPlan]
    boot: BootPlan
    plan_hash: str = field(default="")
    distributed_backend: str = "mp"
    runner: tuple[tuple[str, str], ...] = ()
    """How the cluster's kind runs the plan, as ``(title, text)`` for the plan views (Slurm:
    the job script, each rank's step); derived from the rest, so not hashed."""
    liveness: LivenessPlan | None = None
    """The canary after ready; what is asked of a running group, not what runs: not hashed."""
    memory: MemoryPlan | None = None
    """The memory guard and the restarts' wait (``[memory]``): watched, not run: not hashed.
    None only in a hand-built plan; ``build_plan`` always sets it."""
    metrics: MetricsPlan = field(default_factory=lambda: MetricsPlan(METRICS_INTERVAL_S))
    """The engine metrics' scrape (``[metrics]``): read, not run: not hashed."""

    @property
    def world(self) -> int:
        return len(self.ranks)

    def redactor(self) -> Redactor:
        """Masks this plan's secret values wherever they turn up in free text."""
        return Redactor(v for r in self.ranks for v in r.container.secret_values())

    def to_json(self, show_secrets: bool = False, conceal: Conceal | None = None) -> dict[str, Any]:
        return {
            "recipe": {"name": self.recipe_name, "slug": self.recipe_slug,
                       "path": self.recipe_path, "engine": self.engine,
                       "distributed_backend": self.distributed_backend,
                       "model": self.model, "served_model_name": self.served_model_name},
            "cluster": {"name": self.cluster_name,
                        "local": kind_of(self.cluster_kind).on_this_machine},
            "plan_hash": self.plan_hash,
            "ranks": [r.to_json(show_secrets, conceal) for r in self.ranks],
            "staging": [s.to_json() for s in self.staging],
            "boot": self.boot.to_json(),
            **({"runner": [{"title": t, "text": x} for t, x in self.runner]} if self.runner else {}),
            **({"liveness": self.liveness.to_json()} if self.liveness is not None else {}),
            **({"memory": self.memory.to_json()} if self.memory is not None else {}),
            "metrics": self.metrics.to_json(),
        }


def rank_flags(recipe: Recipe, rank: int, cluster: Cluster, port: int) -> list[str]:
    """The flags the launcher appends to ``args`` for ``rank``: the engine adapter's rule
    (``core/engines``), fed from the recipe and the cluster. The API listens on every interface
    of a real node (clients and the other nodes reach it there), on the loopback only on the
    local cluster (a kind whose nodes are this machine): this machine's network has no business
    reaching a demo rank."""
    spec = recipe.spec
    return engine(spec.engine).rank_flags(Launch(
        model=spec.model, nnodes=spec.required_nodes, rank=rank, head_addr=cluster.head.fabric_ip,
        dist_port=cluster.dist_init_port, port=port, tp_size=spec.tensor_parallel_size,
        distributed_backend=spec.distributed_backend,
        bind_host=LOCAL_HEAD if cluster.traits.on_this_machine else "0.0.0.0",
    ))


def served_model_name(recipe: Recipe) -> str:
    args = recipe.spec.args
    for i, token in enumerate(args):
        if token == "--served-model-name" and i + 1 < len(args):
            return args[i + 1]
        if token.startswith("--served-model-name="):
            return token.split("=", 1)[1]
    return recipe.spec.model


def _placeholder_values(recipe: Recipe, cluster: Cluster, node: Node, rank: int) -> dict[str, str]:
    return {
        "hf": node.hf_cache,
        "rank": str(rank),
        "nnodes": str(recipe.spec.required_nodes),
        "node": node.name,
        "head": cluster.head.fabric_ip,
    }


def _container(recipe: Recipe, cluster: Cluster, node: Node, rank: int, port: int) -> ContainerSpec:
    spec = recipe.spec
    values = _placeholder_values(recipe, cluster, node, rank)

    def sub(text: str) -> str:
        return substitute(text, values)

    mounts = [MountSpec(node.hf_cache, HF_CACHE_IN_CONTAINER, False)]
    mounts += [MountSpec(sub(m.host), sub(m.container), m.read_only) for m in spec.extra_mounts]
    labels = {
        LABEL_RECIPE: recipe.slug,
        LABEL_RANK: str(rank),
        LABEL_WORLD: str(spec.required_nodes),
        LABEL_CLUSTER: cluster.name,
    }
    return ContainerSpec(
        name=f"sparktui-{recipe.slug}-r{rank}",
        image=spec.docker_image,
        entrypoint=[sub(a) for a in spec.entrypoint or []],
        command=[sub(a) for a in spec.args] + rank_flags(recipe, rank, cluster, port),
        env={k: sub(v) for k, v in spec.env.items()},
        mounts=mounts,
        shm_size=spec.shm_size,
        gpus=node.docker.gpus,
        devices=list(node.docker.devices),
        labels=labels,
        secrets=SecretRules(tuple(spec.secret_env), tuple(spec.secret_args)),
        docker=DockerOptions(network_mode="host", ipc_mode="host", cap_add=list(node.docker.cap_add),
                             ulimits=dict(node.docker.ulimits)),
        memory_limit=parse_size(limit) if (limit := spec.memory.limit) is not None else None,
    )


def _boot(recipe: Recipe) -> BootPlan:
    boot = recipe.spec.boot
    must_show = [
        CheckPlan(c.pattern, c.ranks) if isinstance(c, CheckSpec) else CheckPlan(c, "any")
        for c in boot.must_show
    ]
    fatal = list(boot.must_not_show)
    if boot.engine_fatal:
        fatal += [line for line in FATAL_LINES if line not in fatal]
    return BootPlan(
        ready=boot.ready or engine(recipe.spec.engine).ready_line,
        ready_ranks=[0],
        timeout_s=boot.timeout_s,
        stall_s=boot.stall_s,
        must_show=must_show,
        must_not_show=fatal,
        args=boot.args,
        args_expected=list(boot.args_expected),
    )


UNHASHED_RANK_KEYS = frozenset({"serves_http"})
"""Rank facts derived from the engine, not part of what runs: leaving them out keeps the hash
of a running cluster the same when sparktui learns something new about its engine."""


def hashed_text(plan_json: dict[str, Any]) -> str:
    """The canonical JSON the plan hash is taken over: ranks (less their unhashed facts),
    staging and boot, keys sorted, no spaces."""
    hashed = {k: plan_json[k] for k in ("ranks", "staging", "boot")}
    hashed["ranks"] = [{k: v for k, v in r.items() if k not in UNHASHED_RANK_KEYS}
                       for r in hashed["ranks"]]
    return json.dumps(hashed, sort_keys=True, separators=(",", ":"))


def plan_hash(plan_json: dict[str, Any]) -> str:
    """Stable over everything that decides what runs; 12 hex digits are plenty to compare.
    ``plan_json`` carries secrets as keyed digests (``build_plan``), never in clear: the hash
    sits on a container label, and a short secret hashed in clear is found by trying values."""
    return hashlib.sha256(hashed_text(plan_json).encode()).hexdigest()[:12]


def hosted_tp_ranks(node_rank: int, nodes: int, tp: int) -> list[int]:
    """The tensor-parallel ranks a node's container hosts (TP8 on 4 nodes: two each)."""
    return [t for t in range(tp) if t * nodes // tp == node_rank]


def build_plan(recipe: Recipe, cluster: Cluster, secret_key: bytes | None = None) -> Plan:
    """Resolve ``recipe`` on ``cluster``. The caller checks the cluster is large enough (lints).

    ``secret_key``: the cluster's plan key (``core.secrets.plan_key``). The hash covers each
    secret value as an HMAC under it, so changing a secret changes the hash and the label does
    not reveal it. Without a key (previews, tests) secrets do not count in the hash at all."""
    spec = recipe.spec
    world = spec.required_nodes
    rules = engine(spec.engine)
    if world > len(cluster.nodes):
        raise ValueError(f"cluster {cluster.name!r} has {len(cluster.nodes)} nodes, need {world}")
    ranks: list[RankPlan] = []
    staging: list[StagingPlan] = []
    for rank in range(world):
        node = cluster.nodes[rank]
        port = spec.api_port + node.port_offset
        ranks.append(RankPlan(rank, node.name, node.host, port,
                              _container(recipe, cluster, node, rank, port),
                              serves_http=rules.serves_http(rank, world, spec.distributed_backend)))
        values = _placeholder_values(recipe, cluster, node, rank)
        for job in spec.staging:
            staging.append(StagingPlan(
                node=node.name, ranks=hosted_tp_ranks(rank, world, spec.tensor_parallel_size),
                world=spec.tensor_parallel_size,
                id=job.id, kind=job.kind,
                src=substitute(job.src, values), dst=substitute(job.dst, values),
                min_free_bytes=parse_size(job.min_free), tensors=job.tensors,
            ))
    plan = Plan(
        recipe_name=recipe.title, recipe_slug=recipe.slug,
        recipe_path=recipe.source.display, engine=spec.engine, model=spec.model,
        served_model_name=served_model_name(recipe), port=spec.api_port,
        cluster_name=cluster.name, cluster_kind=cluster.kind,
        ranks=ranks, staging=staging, boot=_boot(recipe),
        distributed_backend=spec.distributed_backend,
        liveness=LivenessPlan(spec.liveness.every_s, spec.liveness.timeout_s,
                              spec.liveness.max_tokens) if spec.liveness is not None else None,
        memory=MemoryPlan(spec.memory.floor_bytes, spec.memory.stop_at_bytes,
                          spec.memory.restart_margin_bytes, spec.memory.restart_wait_s),
        metrics=MetricsPlan(spec.metrics.interval_s),
    )
    digest = plan_hash(plan.to_json(conceal=keyed(secret_key) if secret_key else masked))
    for r in ranks:  # after the hash: who starts a plan does not change what it runs
        r.container.labels[LABEL_PLAN] = digest
        r.container.labels[LABEL_OWNER] = cluster.owner
    plan = replace(plan, plan_hash=digest)
    views = cluster.traits.views  # the kind's view shows the hash: made from the hashed plan
    return replace(plan, runner=tuple(views(plan, cluster))) if views is not None else plan
