"""The kernel's messages parsed into findings: real line shapes of ``dmesg --time-format=iso`` (as
this machine printed them for a container killed at its 96 MiB limit) and ``journalctl -k -o
short-iso``, matched to a container by its id; the script run here as root and as an
unprivileged user; garbage never raises."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.dockerview import docker_cli_args, docker_run_line
from sparktui.core.kmsg import (
    KernelRead,
    killed,
    kmsg_argv,
    node_level,
    oom_text,
    parse_kernel,
    parse_line,
    parse_read,
    since,
)
from sparktui.core.rankspec import ContainerSpec

CID = "37c2294939e93217a64f880fba67d0f05a59cad604ae15f6be41bc7fb835d28d"
OTHER = "0123456789abcdef" * 4
DMESG = f"""\
2026-12-02T06:21:40,086598+00:00 python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
2026-12-02T06:21:40,088749+00:00  oom_kill_process.cold+0x8/0x8a
2026-12-02T06:21:40,093704+00:00 Memory cgroup stats for /sptb-node2/{CID}:
2026-12-02T06:21:40,095842+00:00 oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset={CID},mems_allowed=0,oom_memcg=/sptb-node2/{CID},task_memcg=/sptb-node2/{CID},task=python3,pid=4387,uid=0
2026-12-02T06:21:40,095904+00:00 Memory cgroup out of memory: Killed process 4387 (python3) total-vm:275968kB, anon-rss:97764kB, file-rss:5208kB, shmem-rss:0kB, UID:0 pgtables:252kB oom_score_adj:0
2026-12-02T06:30:01,000001+00:00 oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/system.slice/docker-{OTHER}.scope,task=sglang::schedu,pid=9001,uid=0
2026-12-02T06:30:01,000050+00:00 Out of memory: Killed process 9001 (sglang::schedu) total-vm:1kB, anon-rss:1kB
2026-12-02T06:31:00,500000+00:00 NVRM: Xid (PCI:000f:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
2026-12-02T06:31:01,000000+00:00 NVRM: GPU 000f:01:00.0: RmInitAdapter failed! (0x26:0x56:1474)
2026-12-02T06:31:02,000000+00:00 NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05
2026-12-02T06:31:03,000000+00:00 pcieport 000f:00:00.0: AER: Uncorrected (Fatal) error message received from 000f:01:00.0
"""


def test_an_oom_kill_under_a_memory_limit_names_the_container_process_and_time() -> None:
    found = parse_kernel(DMESG)
    kills = [f for f in found if f.kind == "oom_kill"]
    assert len(kills) == 2  # each kill once: "Killed process" folded into its oom-kill line
    k = killed(found, CID)
    assert k is not None and (k.process, k.pid, k.clock, k.container) == ("python3", 4387, "06:21:40", CID)
    assert k.sentence == "out of memory, 06:21:40, process python3, pid 4387"
    assert killed(found, CID[:12]) is k  # Docker's short id
    assert oom_text(k, "sparktui-demo-r2", 137) == (
        "out of memory, 06:21:40, container sparktui-demo-r2 (process python3, pid 4387), exit code 137")
    g = killed(found, OTHER)  # a systemd cgroup (docker-<id>.scope), a global OOM
    assert g is not None and g.process == "sglang::schedu" and g.pid == 9001
    assert killed(found, "f" * 64) is None and killed(found, "") is None and killed(found, "37c2") is None


def test_gpu_and_pcie_errors_are_node_findings_and_driver_chatter_is_not() -> None:
    found = node_level(parse_kernel(DMESG))
    assert [f.kind for f in found] == ["xid", "nvrm", "aer"]
    xid = found[0]
    assert (xid.pid, xid.process) == (1234, "python3")
    assert xid.sentence == ("NVIDIA Xid, 06:31:00: NVRM: Xid (PCI:000f:01:00): 79, pid=1234, "
                            "name=python3, GPU has fallen off the bus.")
    assert found[2].sentence.startswith("PCIe AER, 06:31:03: pcieport 000f:00:00.0: AER: Uncorrected")


def test_since_keeps_what_came_after_the_run_started() -> None:
    found = parse_kernel(DMESG)
    start = parse_kernel(DMESG.splitlines()[5])[0].at
    assert [f.kind for f in since(found, start)] == ["oom_kill", "xid", "nvrm", "aer"]
    assert killed(since(found, start), CID) is None


def test_journalctl_short_iso_lines_both_offsets() -> None:
    a = parse_line(f"2026-12-02T07:21:40+0100 spark2 kernel: oom-kill:constraint=CONSTRAINT_MEMCG,"
                   f"task_memcg=/docker/{CID},task=python3,pid=42,uid=0")
    b = parse_line("2026-12-02T06:21:40+00:00 spark2 kernel: NVRM: Xid (PCI:0000:01:00): 13, "
                   "Graphics Exception")
    assert a is not None and a.container == CID and a.pid == 42 and a.clock == "07:21:40"
    assert b is not None and b.kind == "xid" and a.at == b.at  # one instant, two zones


def test_the_scripts_answer_read_denied_and_missing() -> None:
    ok = parse_read("source dmesg\n" + DMESG)
    assert ok.source == "dmesg" and killed(ok.findings, CID) is not None and not ok.problems
    denied = parse_read("denied dmesg: dmesg: read kernel buffer failed: Operation not permitted\n"
                        "denied journalctl: No journal files were found.\n")
    assert denied.source is None and len(denied.problems) == 2
    why = denied.why_not()
    assert "Operation not permitted" in why and "dmesg_restrict" in why and "\n" not in why


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_garbage_never_raises(text: str) -> None:
    read = parse_read(text)
    assert isinstance(read, KernelRead)
    for line in (text, "2026-12-02T06:21:40,1+99:99 " + text, "2026-12-02T06:21:40 oom-kill:" + text,
                 "2026-12-02T06:21:40 Out of memory: Killed process " + text,
                 "2026-13-45T99:99:99,5+00:00 NVRM: " + text):
        f = parse_line(line)
        assert f is None or f.kind in ("oom_kill", "xid", "nvrm", "aer")


def _run(argv: list[str]) -> KernelRead:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 0, res.stderr
    return parse_read(res.stdout)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root")
def test_the_fixed_script_reads_as_root_and_says_why_not_as_a_user_without_the_right() -> None:
    root = _run(kmsg_argv())
    assert root.source == "dmesg", root
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    restricted = Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1"
    as_user = _run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                    "--clear-groups", *kmsg_argv()])
    if not restricted:
        pytest.skip("kernel.dmesg_restrict=0: every user may read dmesg here")
    assert as_user.source is None and as_user.findings == []
    assert as_user.problems[0].startswith("denied dmesg: "), as_user.problems
    assert "dmesg_restrict" in as_user.why_not()


def _spec(limit: int | None) -> ContainerSpec:
    return ContainerSpec("r0", "img", [], ["serve"], {}, [], None, "none", [], {},
                         memory_limit=limit)


def test_the_memory_limit_is_in_the_record_only_when_set_and_in_every_docker_rendering() -> None:
    assert "memory_limit" not in _spec(None).to_json()  # existing plans hash as they did
    assert _spec(96 << 20).to_json()["memory_limit"] == 96 << 20
    assert "--memory 100663296 --memory-swap 100663296" in docker_run_line(_spec(96 << 20))
    assert "--memory" not in docker_run_line(_spec(None))
    argv, _ = docker_cli_args(_spec(96 << 20), {})
    assert argv[argv.index("--memory") + 1] == argv[argv.index("--memory-swap") + 1] == "100663296"



def test_the_local_runtime_says_the_limit_is_not_applied(tmp_path: Path) -> None:
    from sparktui.core.cluster import local_cluster
    from sparktui.core.lints import lint
    from sparktui.core.recipe import load_recipe

    demo = Path(__file__).resolve().parents[2] / "recipes" / "demo-tp4"
    shutil.copytree(demo, tmp_path / "demo-tp4")
    path = tmp_path / "demo-tp4" / "recipe.toml"
    assert "[memory]" not in path.read_text()
    assert not [p for p in lint(load_recipe(path), local_cluster(4)) if p.code == "memory-limit-local"]
    path.write_text(path.read_text() + '\n[memory]\nlimit = "96m"\n')
    said = [p for p in lint(load_recipe(path), local_cluster(4)) if p.code == "memory-limit-local"]
    assert len(said) == 1 and said[0].severity == "warning", said
    assert "not applied" in said[0].message and said[0].line is not None
