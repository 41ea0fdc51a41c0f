"""A node's memory reading: what the fixed script prints on this machine, and on a kernel with
no pressure stall information."""

from __future__ import annotations

import subprocess

import pytest

from sparktui.core.meminfo import NO_PSI, memory_argv, memory_loop_argv, parse_memory


def test_this_machines_memory_is_read_by_the_script() -> None:
    out = subprocess.run(memory_argv(), capture_output=True, text=True, timeout=10, check=True).stdout
    mem = parse_memory(out)
    with open("/proc/meminfo") as f:
        kb = {line.split(":")[0]: int(line.split()[1]) for line in f}
    assert mem.total == kb["MemTotal"] * 1024
    assert 0 < mem.available <= mem.total
    assert (mem.psi_some10 is not None) == _has_psi()


def _has_psi() -> bool:
    try:
        with open("/proc/pressure/memory"):
            return True
    except OSError:
        return False


def test_a_kernel_without_psi_gives_none_and_garbage_is_refused() -> None:
    mem = parse_memory(f"MemTotal: 1000 kB\nMemAvailable: 500 kB\n{NO_PSI}\n")
    assert (mem.total, mem.available, mem.psi_some10, mem.psi_full10) == (1024000, 512000, None, None)
    mem = parse_memory("MemTotal: 1000 kB\nMemAvailable: 500 kB\n"
                       "psi some avg10=12.50 avg60=3.00 avg300=1.00 total=5\n"
                       "psi full avg10=2.25 avg60=0.00 avg300=0.00 total=1\n")
    assert (mem.psi_some10, mem.psi_full10) == (12.5, 2.25)
    with pytest.raises(ValueError):
        parse_memory("sh: 1: cannot open /proc/meminfo: No such file\n")


def test_the_loop_prints_one_reading_per_interval() -> None:
    proc = subprocess.Popen(memory_loop_argv(0.2), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        readings, lines = [], []
        while len(readings) < 3:
            line = proc.stdout.readline().rstrip("\n")
            if line == "---sparktui-mem---":
                readings.append(parse_memory("\n".join(lines)))
                lines = []
            else:
                lines.append(line)
        assert all(r.total > 0 for r in readings)
    finally:
        proc.kill()
        proc.wait()
