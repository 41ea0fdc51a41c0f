"""A container's processes as ps and /proc print them, the engine among them, and what its
samples say (issue 27: is the engine alive in its container?)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparktui.core.engines import ENGINES, FATAL_LINES
from sparktui.core.procs import (
    DEMO_MARK,
    DEMO_STACK_SIGNAL,
    EngineSample,
    EngineTrack,
    Proc,
    from_proc,
    from_top,
    gone_text,
    inner_pid,
    marks_of,
    masked,
    proc_group,
    ps_seconds,
    says_fatal,
    stack_lines,
    stack_signal,
)

# what dockerd answered for PS_ARGS on the test cluster (a shell wrapper around the demo engine)
TITLES = ["PID", "STAT", "TIME", "COMMAND", "COMMAND"]
ROWS = [
    ["4101", "Ss", "00:00:00", "docker-init", "/sbin/docker-init -- sh -c python3 -m "
     "sparktui.demo.engine --api-key sk-secret-1234; sleep 100000"],
    ["4120", "S", "00:00:00", "sh", "sh -c python3 -m sparktui.demo.engine --api-key "
     "sk-secret-1234; sleep 100000"],
    ["4121", "Sl", "01-02:03:04", "python3", "python3 -m sparktui.demo.engine --api-key "
     "sk-secret-1234"],
]


def test_ps_time_reads_every_form_ps_prints() -> None:
    assert ps_seconds("00:00:07") == 7
    assert ps_seconds("01:02:03") == 3723
    assert ps_seconds("2-00:00:01") == 2 * 86400 + 1
    assert ps_seconds("12:34") == 754
    assert ps_seconds("42") == 42  # cputimes
    assert ps_seconds("-") == 0
    with pytest.raises(ValueError):
        ps_seconds("soon")


def test_top_rows_become_processes_with_the_whole_command_line() -> None:
    procs = from_top(TITLES, ROWS)
    assert [p.pid for p in procs] == [4101, 4120, 4121]
    assert procs[2].cpu_s == 86400 + 2 * 3600 + 3 * 60 + 4
    assert procs[2].args.endswith("--api-key sk-secret-1234")
    with pytest.raises(ValueError):  # a ps that ignored the arguments
        from_top(["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"], [])


def test_the_engine_is_neither_the_init_nor_the_shell_that_names_it() -> None:
    procs = from_top(TITLES, ROWS)
    sample = EngineSample.of(procs, marks_of(ENGINES["sglang"].process_marks))
    assert sample.main is not None and sample.main.pid == 4121
    assert sample.others == ("docker-init", "sh")
    gone = EngineSample.of([*procs[:2], Proc(4130, "S", 0, "sleep", "sleep 100000")],
                           marks_of(("sglang",)))
    assert gone.main is None
    assert gone_text(gone) == "docker-init, sh, sleep"


def test_a_real_engines_processes_are_found_by_its_adapters_marks() -> None:
    sglang = Proc(7, "Rl", 99, "sglang::schedul", "sglang::scheduler_TP0")
    vllm = Proc(8, "Sl", 5, "python3", "/usr/bin/python3 -m vllm.entrypoints.openai.api_server")
    assert EngineSample.of([sglang], marks_of(ENGINES["sglang"].process_marks)).main == sglang
    assert EngineSample.of([vllm], marks_of(ENGINES["vllm"].process_marks)).main == vllm
    assert EngineSample.of([vllm], marks_of(ENGINES["sglang"].process_marks)).main is None


def test_command_lines_are_masked() -> None:
    procs = masked(from_top(TITLES, ROWS), lambda t: t.replace("sk-secret-1234", "********"))
    assert all("sk-secret" not in p.args for p in procs)


def test_proc_files_become_a_process() -> None:
    stat = "4121 (python3 (x)) S 4120 4120 4120 0 -1 4194304 10 0 0 0 250 50 0 0 20 0 3 0 77 0 0"
    proc = from_proc(4121, stat, b"python3\0-m\0" + DEMO_MARK.encode() + b"\0", 100)
    assert proc == Proc(4121, "S", 3.0, "python3 (x)", f"python3 -m {DEMO_MARK}")
    assert proc_group(stat) == 4120
    assert from_proc(1, "garbage", b"", 100) is None
    here = Path(f"/proc/{os.getpid()}")  # this very process, as the local cluster reads it
    me = from_proc(os.getpid(), (here / "stat").read_text(), (here / "cmdline").read_bytes(),
                   os.sysconf("SC_CLK_TCK"))
    assert me is not None and me.state in ("R", "S") and "pytest" in me.args


def test_the_container_pid_is_the_last_of_nspid() -> None:
    assert inner_pid("Name:\tpython3\nNSpid:\t4121\t7\n") == 7
    assert inner_pid("Name:\tpython3\nNSpid:\t4121\n") == 4121
    assert inner_pid("Name:\tpython3\n") is None


def test_gone_only_once_seen_and_still_only_with_a_silent_log() -> None:
    engine = Proc(5, "S", 10, "python3", f"python3 -m {DEMO_MARK}")
    shell = Proc(4, "S", 0, "sh", f"sh -c 'python3 -m {DEMO_MARK}; sleep 1d'")
    marks = marks_of(())
    track = EngineTrack()
    view, gone = track.add(EngineSample.of([shell], marks), True, 1.0)
    assert not gone and view.pid is None  # a wrapper may set things up first
    view, gone = track.add(EngineSample.of([shell, engine], marks), True, 1.0)
    assert (view.pid, view.state, view.cpu_s, view.warning, gone) == (5, "S", 10, None, False)
    track.add(EngineSample.of([shell, engine], marks), False, 1.0)  # one still sample: fine
    view, _ = track.add(EngineSample.of([shell, engine], marks), True, 1.0)
    assert view.warning is None  # the log moved
    for _ in range(2):
        view, _ = track.add(EngineSample.of([shell, engine], marks), False, 1.0)
    assert view.warning is not None and "no CPU time and no log line for 2 s" in view.warning
    stopped = Proc(5, "T", 11, "python3", engine.args)
    view, _ = track.add(EngineSample.of([shell, stopped], marks), True, 1.0)
    assert view.warning is not None and "stopped" in view.warning
    view, gone = track.add(EngineSample.of([shell], marks), False, 1.0)
    assert gone and view.pid is None


def test_the_stack_signal_is_the_demo_engines_and_none_for_real_engines() -> None:
    demo = Proc(5, "S", 1, "python3", f"python3 -m {DEMO_MARK}")
    real = Proc(6, "S", 1, "python3", "python3 -m sglang.launch_server")
    assert stack_signal(ENGINES["sglang"].stack_signal, demo) == DEMO_STACK_SIGNAL
    assert stack_signal(ENGINES["sglang"].stack_signal, real) is None
    assert stack_signal(ENGINES["vllm"].stack_signal, real) is None


def test_the_stack_block_is_cut_from_what_the_rank_printed() -> None:
    printed = [
        "[2026-12-01 12:00:00 TP0] Decode batch. #running-req: 0",
        "Thread 0x00007f0000000001 (most recent call first):",
        '  File "/usr/lib/python3.11/threading.py", line 320 in wait',
        "",
        "Current thread 0x00007f0000000002 (most recent call first):",
        '  File "/sparktui/demo/rank.py", line 88 in run',
        "[2026-12-01 12:00:01 TP0] Decode batch. #running-req: 0",
    ]
    assert stack_lines(printed) == printed[1:6]
    assert stack_lines(printed[:1]) == []


def test_a_peers_lost_collective_line_is_fatal_and_a_silent_rank_is_not() -> None:
    fatal = FATAL_LINES
    assert says_fatal(["[rank1]: ... TCPStore at 10.0.0.1:5000 ... Failed to recv, got 0 bytes"], fatal)
    assert says_fatal(["x Watchdog caught collective operation timeout: WorkNCCL"], fatal)
    assert not says_fatal(["Decode batch. #running-req: 0", "Failed to recv before TCPStore"], fatal)


def test_an_engine_whose_container_is_ending_is_not_gone() -> None:
    """The engine was the init's only child: the init is all that is left for a moment before
    the container exits, and its exit (code and all) says what happened."""
    init = Proc(1, "S", 0, "docker-init", f"/sbin/docker-init -- python3 -m {DEMO_MARK}")
    engine = Proc(5, "S", 1, "python3", f"python3 -m {DEMO_MARK}")
    track = EngineTrack()
    track.add(EngineSample.of([init, engine], marks_of(())), True, 1.0)
    view, gone = track.add(EngineSample.of([init], marks_of(())), False, 1.0)
    assert not gone and view.pid is None
    assert not EngineSample.of([], marks_of(())).runs_on


def test_a_stack_dumps_lines_are_not_a_ranks_progress() -> None:
    from sparktui.core.procs import stack_line
    for text in ("Thread 0x00007fe1bdacc6c0 (most recent call first):",
                 'Current thread 0x00007f (most recent call first):',
                 '  File "/x/rendezvous.py", line 56 in read_line', ""):
        assert stack_line(text), text
    for text in ("[2026-12-02 01:13:59 TP2] NCCL INFO comm 0x7f3a5c0002 rank 2 nranks 4",
                 "Loading safetensors checkpoint shards:  25% Completed"):
        assert not stack_line(text), text
