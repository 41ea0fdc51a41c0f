"""Preflight per node, all nodes at once: every check passed, warned or failed with a sentence.

Replaces the operator's `doctor` verb: the node reached (SSH), the runtime's own lines (the
Docker runtime's engine and image: its ``Preflight``), the same image on every node, and through
the node's shell (``NodeExec``) the HF snapshot, staging destination and free space, the API
port, the NICs NCCL is told to use, GPUs; and whether the weights and the engine's memory
fraction fit each node's memory (``backend.memfit``, a finding per node).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sparktui.backend.findings import Finding, Verdict
from sparktui.backend.kmsg import doctor_findings
from sparktui.backend.nodeshell import NodeError
from sparktui.backend.runtimes.base import NodeExec, Preflight, Runtime
from sparktui.backend.together import together
from sparktui.core.cluster import Node
from sparktui.core.memfit import NodeFit
from sparktui.core.nodevalues import nic_names
from sparktui.core.plan import Plan
from sparktui.core.units import format_bytes

__all__ = ["Finding", "Verdict", "doctor"]

PORT_FREE = ("import socket,sys\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
             "s.bind(('0.0.0.0',int(sys.argv[1])))")
DST_CHECK = (
    # the nearest folder of dst that exists (the agent makes the rest), whether it is writable,
    # and its free space: a check only reads, it never makes dst
    'd=$1; while [ ! -e "$d" ] && [ "$d" != / ]; do d=${d%/*}; d=${d:-/}; done; echo "$d"; '
    '[ -d "$d" ] && [ -w "$d" ] || exit 3; df -Pk -- "$d"'
)
NOT_WRITABLE = 3


def hf_snapshot_dir(hf_cache: str, model: str) -> str:
    return f"{hf_cache}/hub/models--{model.replace('/', '--')}"


async def check_node(node: Node, runtime: Runtime, plan: Plan,
                     rank: int) -> tuple[list[Finding], str | None]:
    """Findings for one node, and its image id (to compare across nodes)."""
    found: list[Finding] = []

    def add(check: str, verdict: Verdict, sentence: str) -> None:
        found.append(Finding(node.name, check, verdict, sentence))

    try:
        await runtime.connect(node.name)
    except NodeError as exc:
        add("ssh", "failed", exc.reason)
        return found, None
    add("ssh", "passed", runtime.describe(node.name))

    spec = plan.ranks[rank].container
    image_id: str | None = None
    if isinstance(runtime, Preflight):
        lines, image_id = await runtime.preflight(node, spec.image, plan.recipe_slug)
        found += lines
    if not isinstance(runtime, NodeExec):
        return found, image_id
    shell = runtime.shell(node.name)

    async def sh(argv: list[str]) -> tuple[int, str]:
        res = await shell.run(argv, timeout=20)
        return res.returncode, (res.stdout + res.stderr).strip()

    try:
        snap = hf_snapshot_dir(node.hf_cache, plan.model)
        rc, _ = await sh(["test", "-d", snap])
        if rc == 0:
            add("hf snapshot", "passed", f"{snap} present")
        else:
            add("hf snapshot", "warned", f"{snap} not found: the engine will try to download "
                                         f"{plan.model}")
        for job in (s for s in plan.staging if s.node == node.name):
            if not job.dst.startswith("/"):  # validation refuses it; never sent as an option
                add(f"staging {job.id}", "failed", f"{job.dst} is not an absolute path")
                continue
            res = await shell.run(["sh", "-c", DST_CHECK, "sparktui-doctor", job.dst], timeout=20)
            rc, out = res.returncode, (res.stdout + res.stderr).strip()
            folder, _, df = res.stdout.strip().partition("\n")  # stderr apart: df's last line counts
            # where dst does not exist yet, the sentence names the folder the agent will make
            # it in: that one's writability and free space are what staging meets
            where = job.dst if folder == job.dst else f"{job.dst} (not there yet; in {folder})"
            if rc == NOT_WRITABLE:
                add(f"staging {job.id}", "failed", f"{where} is not a writable folder")
                continue
            free = _df_free(df) if rc == 0 else None
            if free is None:
                add(f"staging {job.id}", "warned", f"cannot read free space at {where}: {out}")
            elif free < job.min_free_bytes:
                add(f"staging {job.id}", "failed",
                    f"{where} has {format_bytes(free)} free, needs {format_bytes(job.min_free_bytes)}")
            else:
                add(f"staging {job.id}", "passed",
                    f"{where} writable, {format_bytes(free)} free (needs "
                    f"{format_bytes(job.min_free_bytes)})")
        port = plan.ranks[rank].port
        rc, out = await sh(["python3", "-c", PORT_FREE, str(port)])
        if rc == 0:
            add("port", "passed", f"port {port} is free")
        else:
            add("port", "warned", f"port {port} is in use on {node.name}")
        for var, name, sysdir in nic_names(spec.env):
            rc, _ = await sh(["test", "-e", f"/sys/class/{sysdir}/{name}"])
            if rc == 0:
                add("nic", "passed", f"{name} ({var}) present")
            else:
                add("nic", "failed", f"{name} named in {var} does not exist on {node.name}")
        if spec.gpus not in ("none", ""):
            rc, out = await sh(["nvidia-smi", "-L"])
            if rc == 0:
                gpus = [line for line in out.splitlines() if line.startswith("GPU ")]
                add("gpu", "passed", f"{len(gpus)} GPU(s): {gpus[0] if gpus else ''}")
            else:
                add("gpu", "failed", f"nvidia-smi failed on {node.name}: {out[:200]}")
        found += await doctor_findings(shell)  # its kernel's oom kills, Xid, AER (backend.kmsg)
    except NodeError as exc:
        add("ssh", "failed", exc.reason)
    return found, image_id


FIT_VERDICT: dict[str, Verdict] = {"fits": "passed", "short": "failed", "unknown": "warned"}


async def _no_fits() -> list[NodeFit]:
    return []


def _df_free(out: str) -> int | None:
    lines = out.strip().splitlines()
    if len(lines) < 2:
        return None
    fields = lines[-1].split()
    try:
        return int(fields[3]) * 1024
    except (IndexError, ValueError):
        return None


async def doctor(plan: Plan, nodes: list[Node], runtime: Runtime,
                 memory: Callable[[], Awaitable[list[NodeFit]]] | None = None) -> list[Finding]:
    """Every node's findings; ``memory``: the fit check (``Orchestrator.check_memory``), read
    beside the other checks, a finding per node (left out, as the node's other checks are, when
    the runtime reaches no node's shell or the node could not be reached)."""
    checks = asyncio.ensure_future(together(*(check_node(n, runtime, plan, rank)
                                              for rank, n in enumerate(nodes))))
    fitting = asyncio.ensure_future(
        memory() if memory is not None and isinstance(runtime, NodeExec) else _no_fits())
    await together(checks, fitting)
    results, fits = checks.result(), fitting.result()
    findings = [f for fs, _ in results for f in fs]
    # a node doctor could not reach has said why once (its ssh finding): no second sentence
    unreached = {f.node for f in findings if f.check == "ssh" and f.verdict == "failed"}
    findings += [Finding(f.node, "memory fit", FIT_VERDICT[f.verdict], f.sentence())
                 for f in fits if f.node not in unreached]
    ids = {n.name: image for n, (_, image) in zip(nodes, results, strict=False) if image}
    if len(set(ids.values())) > 1:
        detail = ", ".join(f"{name} {image[7:19]}" for name, image in ids.items())
        findings.append(Finding("all", "same image", "failed",
                                f"nodes run different builds of {plan.ranks[0].container.image}: {detail}; "
                                f"make them one with sparktui image sync {plan.recipe_slug}"))
    elif len(ids) == len(nodes) and ids:
        findings.append(Finding("all", "same image", "passed",
                                f"every node has image {next(iter(ids.values()))[7:19]}"))
    return findings
