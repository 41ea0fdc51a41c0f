"""Checks that a recipe is consistent with itself and with the cluster it will run on.

Each lint has a code (shown in output, usable in tests) and points at the line to fix.
Errors stop ``plan`` and ``up``; warnings are shown and the plan goes on.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path

from sparktui.agents.sparse_rows import bytes_for_ranks, selected_tensors
from sparktui.core.cluster import Cluster
from sparktui.core.engines.argv import demo_entrypoint, table_for, value_problem, walk
from sparktui.core.kinds import LOCAL
from sparktui.core.nodevalues import nic_names, unsafe_sentence
from sparktui.core.placeholders import substitute
from sparktui.core.plan import hosted_tp_ranks
from sparktui.core.problems import Problem
from sparktui.core.recipe import HF_CACHE_IN_CONTAINER, Recipe, flag_name
from sparktui.core.secrets import redact_problems
from sparktui.core.units import format_bytes
from sparktui.core.validation import suggest

EP_FLAGS = ("--ep-size", "--ep", "--expert-parallel-size")
# env names that hold a folder sparktui is expected to fill by staging
STAGED_ENV_MARKERS = ("PACKED", "STAGED", "STAGING")


def flag_values(args: list[str]) -> dict[str, list[tuple[int, str | None]]]:
    """Each flag in ``args`` with its index and value (``--x 1``, ``--x=1`` or a bare switch)."""
    out: dict[str, list[tuple[int, str | None]]] = {}
    for i, token in enumerate(args):
        name = flag_name(token)
        if name is None:
            continue
        if "=" in token:
            value: str | None = token.split("=", 1)[1]
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
        else:
            value = None
        out.setdefault(name, []).append((i, value))
    return out


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def lint_parallel_sizes(recipe: Recipe) -> list[Problem]:
    spec = recipe.spec
    flags = flag_values(spec.args)
    problems = []
    tp = spec.tensor_parallel_size
    if "TP_SIZE" in spec.env and _int(spec.env["TP_SIZE"]) != tp:
        problems.append(recipe.problem(
            ("env", "TP_SIZE"),
            f"TP_SIZE={spec.env['TP_SIZE']!r} disagrees with tensor_parallel_size = {tp}; "
            "adapters that read TP_SIZE would shard for a different world",
            code="tp-size",
        ))
    ep_flag = next(((f, v[-1]) for f in EP_FLAGS if f in flags for v in [flags[f]]), None)
    if "EP_SIZE" in spec.env and ep_flag is not None:
        flag, (_, value) = ep_flag
        if _int(spec.env["EP_SIZE"]) != _int(value):
            problems.append(recipe.problem(
                ("env", "EP_SIZE"),
                f"EP_SIZE={spec.env['EP_SIZE']!r} disagrees with {flag} {value}",
                code="ep-size",
            ))
    return problems


def lint_cuda_graph(recipe: Recipe) -> list[Problem]:
    flags = flag_values(recipe.spec.args)
    graph = flags.get("--cuda-graph-max-bs-decode") or flags.get("--cuda-graph-max-bs")
    running = flags.get("--max-running-requests")
    if not graph or not running:
        return []
    (gi, gv), (_, rv) = graph[-1], running[-1]
    g, r = _int(gv), _int(rv)
    if g is not None and r is not None and g < r:
        return [recipe.problem(
            ("args", gi),
            f"--cuda-graph-max-bs-decode {g} is below --max-running-requests {r}: "
            "decode batches above {g} fall back to eager mode".replace("{g}", str(g)),
            severity="warning", code="cuda-graph-bs",
        )]
    return []


def lint_duplicate_flags(recipe: Recipe) -> list[Problem]:
    problems = []
    for flag, uses in flag_values(recipe.spec.args).items():
        if len(uses) > 1:
            first = uses[0][0]
            for i, value in uses[1:]:
                problems.append(recipe.problem(
                    ("args", i),
                    f"{flag} is given again (first at args[{first}]); the engine keeps the last "
                    f"one ({value if value is not None else 'switch'})",
                    severity="warning", code="duplicate-flag",
                ))
    return problems


def lint_engine_flags(recipe: Recipe) -> list[Problem]:
    """The args held against the engine's own flag table (``core/engines/flagtable``): a flag
    the version does not know is a warning (a fork's image may know it: ``engine_flags``
    says which table applies, or ``"none"``); what its parser would refuse is an error."""
    spec = recipe.spec
    table = table_for(spec.engine, spec.engine_flags, spec.entrypoint)
    if table is None:
        return []
    which = "" if spec.engine_flags else "; the newest shipped, as the recipe sets no engine_flags"
    problems = []
    hints = 3  # difflib over ~500 options costs ~10 ms a flag: a few suggestions per recipe
    for use in walk(table, spec.args, skip_demo=demo_entrypoint(spec.entrypoint)):
        if use.flag is None and use.ambiguous:
            shown = ", ".join(use.ambiguous[:6]) + (", ..." if len(use.ambiguous) > 6 else "")
            problems.append(recipe.problem(
                ("args", use.index), f"{use.spelling} is ambiguous for {table.label}'s parser: "
                f"it abbreviates {shown}; write the whole flag", code="engine-flag"))
        elif use.flag is None:
            hint = suggest(use.spelling, list(table.long_options)) if hints > 0 else None
            hints -= 1
            problems.append(recipe.problem(
                ("args", use.index), f"{use.spelling} is not a flag of {table.label} (checked "
                f"against its own parser's table{which})"
                f"{f'; did you mean {hint}?' if hint else ''}",
                severity="warning", code="engine-flag"))
        elif not use.flag.takes_value and use.inline:
            problems.append(recipe.problem(
                ("args", use.index), f"{use.spelling} is a switch in {table.label}: it takes "
                f"no value (write {use.spelling} alone)", code="engine-flag"))
        elif use.missing:
            problems.append(recipe.problem(
                ("args", use.index), f"{use.spelling} takes a value in {table.label} and none "
                "follows it", code="engine-flag"))
        else:
            for i, value in use.values:
                why = value_problem(use.flag, value)
                if why is not None:
                    problems.append(recipe.problem(
                        ("args", i), f"{use.spelling} {value[:80]}: {table.label} takes {why}",
                        code="engine-flag"))
    return problems


def _host_path(container_path: str, mounts: list[tuple[str, str]]) -> str | None:
    """The host folder behind a container path, through the longest matching mount."""
    best: tuple[str, str] | None = None
    for host, target in mounts:
        t = target.rstrip("/") or "/"
        if (container_path == t or container_path.startswith(t + "/")) and (
            best is None or len(t) > len(best[1])
        ):
            best = (host, t)
    if best is None:
        return None
    rest = container_path[len(best[1]):].lstrip("/")
    return posixpath.normpath(posixpath.join(best[0], rest)) if rest else posixpath.normpath(best[0])


def lint_staged_paths(recipe: Recipe) -> list[Problem]:
    """An env path the engine reads staged data from must be where a staging job writes."""
    spec = recipe.spec
    mounts = [(m.host, m.container) for m in spec.extra_mounts]
    dsts = {posixpath.normpath(j.dst) for j in spec.staging}
    problems = []
    for name, value in spec.env.items():
        if not value.startswith("/") or not any(mk in name.upper() for mk in STAGED_ENV_MARKERS):
            continue
        if value.startswith(HF_CACHE_IN_CONTAINER):
            continue
        host = _host_path(value, mounts)
        if host is None:
            problems.append(recipe.problem(
                ("env", name),
                f"{name}={value} is not inside any extra_mounts container path, so the "
                "container cannot see staged data there", severity="warning", code="staged-path"))
        elif host not in dsts:
            where = ", ".join(sorted(dsts)) or "nowhere (no [[staging]] job)"
            problems.append(recipe.problem(
                ("env", name),
                f"{name}={value} is {host} on the host, but staging writes to {where}",
                severity="warning", code="staged-path"))
    for i, job in enumerate(spec.staging):
        visible = any(
            posixpath.normpath(job.dst) == posixpath.normpath(h)
            or posixpath.normpath(job.dst).startswith(posixpath.normpath(h) + "/")
            for h, _ in mounts
        )
        if not visible and "{{hf}}" not in job.dst:
            problems.append(recipe.problem(
                ("staging", i, "dst"),
                f"staging writes to {job.dst}, which no extra_mounts entry makes visible in "
                "the container", severity="warning", code="staged-path"))
    return problems


def lint_cluster_size(recipe: Recipe, cluster: Cluster | None) -> list[Problem]:
    if cluster is None or recipe.spec.required_nodes <= len(cluster.nodes):
        return []
    where = f" ({cluster.path})" if cluster.path else ""
    return [recipe.problem(
        ("required_nodes",),
        f"the recipe needs {recipe.spec.required_nodes} nodes but cluster {cluster.name!r}{where} "
        f"has {len(cluster.nodes)}",
        code="cluster-size",
    )]


def lint_min_free(recipe: Recipe, cluster: Cluster | None) -> list[Problem]:
    """``min_free`` below what the job writes, when the checkpoint is readable from here
    (the local cluster, or a NAS mounted at the same path as on the nodes)."""
    spec = recipe.spec
    if cluster is None or not spec.staging:
        return []
    problems = []
    node = cluster.nodes[0]
    values = {"hf": node.hf_cache, "rank": "0", "nnodes": str(spec.required_nodes),
              "node": node.name, "head": node.fabric_ip}
    for i, job in enumerate(spec.staging):
        try:
            src = Path(substitute(job.src, values))
            if not src.is_absolute() or not src.is_dir():
                continue
            layers = selected_tensors(src, job.id, job.tensors)
        except (OSError, ValueError, KeyError, TypeError):  # a name past the file-name limit...
            continue
        tp = spec.tensor_parallel_size
        if cluster.traits.on_this_machine:  # every "node" writes into the same dst on this disk
            per_node = bytes_for_ranks(layers, list(range(tp)), tp)
        else:
            per_node = max(
                bytes_for_ranks(layers, hosted_tp_ranks(r, spec.required_nodes, tp), tp)
                for r in range(spec.required_nodes)
            )
        if job.min_free_bytes < per_node:
            problems.append(recipe.problem(
                ("staging", i, "min_free"),
                f"min_free {job.min_free} ({format_bytes(job.min_free_bytes)}) is below the "
                f"{format_bytes(per_node)} this job writes per node",
                severity="warning", code="min-free"))
    return problems


def lint_memory_limit(recipe: Recipe, cluster: Cluster | None) -> list[Problem]:
    """``[memory] limit`` is a container's memory limit: local processes have none, so the
    limit is not applied there (the memory guard still watches the machine)."""
    if cluster is None or cluster.kind != LOCAL or recipe.spec.memory.limit is None:
        return []
    return [recipe.problem(
        ("memory", "limit"),
        f"[memory] limit {recipe.spec.memory.limit} is not applied on cluster {cluster.name!r}: "
        "its ranks are local processes, not containers (the memory guard still watches the "
        "machine's available memory)",
        severity="warning", code="memory-limit-local")]


def first_node_values(recipe: Recipe, cluster: Cluster | None) -> dict[str, str]:
    """The placeholders filled as for rank 0 on the first node (stand-ins without a cluster)."""
    node = cluster.nodes[0] if cluster is not None and cluster.nodes else None
    return {"hf": node.hf_cache if node else "/hf", "rank": "0",
            "nnodes": str(recipe.spec.required_nodes), "node": node.name if node else "node",
            "head": node.fabric_ip if node else "head"}


def lint_node_paths(recipe: Recipe, cluster: Cluster | None) -> list[Problem]:
    """Folders on the nodes must be absolute once placeholders are filled: a relative path or
    ``~`` would be read against whatever folder the agent or docker happens to start in (a
    literal ``~`` folder, or docker's refusal), so it is an error here, with the fix."""
    spec = recipe.spec
    values = first_node_values(recipe, cluster)
    paths: list[tuple[tuple[str | int, ...], str]] = []
    for i, job in enumerate(spec.staging):
        paths += [(("staging", i, "src"), job.src), (("staging", i, "dst"), job.dst)]
    for i, m in enumerate(spec.extra_mounts):
        paths += [(("extra_mounts", i, "host"), m.host), (("extra_mounts", i, "container"), m.container)]
    problems = []
    for key, raw in paths:
        value = substitute(raw, values)
        if value.startswith("/"):
            continue
        why = ("~ is not expanded on the nodes" if value.startswith("~")
               else "a relative path has no fixed meaning on a node")
        problems.append(recipe.problem(
            key, f"{raw[:200]!r} must be an absolute path: {why}; write the full folder "
            "(for example /home/<user>/... or {{hf}}/...)", code="node-path"))
    return problems


def lint_node_values(recipe: Recipe, cluster: Cluster | None) -> list[Problem]:
    """Values a node's shell sees (staging folders once placeholders are filled, the model
    doctor looks up, the NICs it checks) hold only the safe characters of ``core.nodevalues``.
    A kind that runs every command without a shell (the local cluster) takes any value."""
    if cluster is not None and not cluster.traits.node_shell:
        return []
    spec = recipe.spec
    values = first_node_values(recipe, cluster)
    found: list[tuple[tuple[str | int, ...], str]] = [(("model",), spec.model)]
    for i, job in enumerate(spec.staging):
        found += [(("staging", i, "src"), substitute(job.src, values)),
                  (("staging", i, "dst"), substitute(job.dst, values))]
    found += [(("env", var), name) for var, name, _ in nic_names(spec.env)]
    problems = []
    for key, value in found:
        why = unsafe_sentence(value)
        if why is not None:
            problems.append(recipe.problem(key, why, code="node-value"))
    return problems


RECIPE_LINTS: list[Callable[[Recipe], list[Problem]]] = [
    lint_parallel_sizes, lint_cuda_graph, lint_duplicate_flags, lint_staged_paths,
    lint_engine_flags,
]
CLUSTER_LINTS: list[Callable[[Recipe, Cluster | None], list[Problem]]] = [
    lint_cluster_size, lint_min_free, lint_node_paths, lint_node_values, lint_memory_limit,
]


def lint(recipe: Recipe, cluster: Cluster | None = None) -> list[Problem]:
    """Every lint, errors first, each group in file order."""
    found = [p for f in RECIPE_LINTS for p in f(recipe)]
    found += [p for f in CLUSTER_LINTS for p in f(recipe, cluster)]
    found = redact_problems(found, recipe.source.data)  # a lint may quote a secret's value
    return sorted(found, key=lambda p: (p.severity != "error", p.line or 0, p.column or 0))


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]
