"""Telemetry parsers on real nvidia-smi output (tests/data/fixtures: an H200 busy and idle, a
GB10 as its owners report it) and on a host without nvidia-smi."""

from __future__ import annotations

import subprocess
import time

import pytest

from sparktui.core.telemetry import (
    INVALID,
    SECTION,
    parse_gpus,
    parse_meminfo,
    parse_sample,
    sample_argv,
    valid_path,
)
from tests.conftest import DATA

FIX = DATA / "fixtures"
H200_COLUMNS = ["index", "name", "uuid", "driver_version", "pci.bus_id", "memory.total", "memory.used", "memory.free", "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "clocks.mem", "fan.speed", "pstate"]


def test_h200_busy_with_header_and_units() -> None:
    (gpu,), note = parse_gpus((FIX / "nvidia-smi-h200/query-busy.csv").read_text())
    assert note == ""
    assert gpu.name == "NVIDIA H200" and gpu.index == 0
    assert gpu.util_pct == 100 and gpu.temp_c == 63
    assert gpu.power_w == pytest.approx(690.92)
    assert gpu.mem_total == 143771 * 2**20 and gpu.mem_used == 1011 * 2**20


def test_h200_busy_noheader_nounits() -> None:
    (gpu,), _ = parse_gpus((FIX / "nvidia-smi-h200/query-busy-nounits.csv").read_text(), H200_COLUMNS)
    assert gpu.util_pct == 100 and gpu.power_w == pytest.approx(690.62)
    assert gpu.mem_total == 143771 * 2**20


def test_h200_idle() -> None:
    (gpu,), _ = parse_gpus((FIX / "nvidia-smi-h200/query-idle.csv").read_text())
    assert gpu.util_pct == 0 and gpu.mem_used == 0 and gpu.power_w == pytest.approx(127.42)


def test_gb10_unified_memory_from_meminfo() -> None:
    (gpu,), _ = parse_gpus((FIX / "nvidia-smi-gb10/query.csv").read_text())
    assert gpu.mem_total is None and gpu.mem_used is None  # [N/A]
    assert gpu.util_pct == 0 and gpu.power_w == pytest.approx(11.17) and gpu.temp_c == 35
    mem = parse_meminfo((FIX / "nvidia-smi-gb10/meminfo-excerpt.txt").read_text())
    assert mem == {"MemTotal": 127600748 * 1024, "MemAvailable": 118566368 * 1024}
    csv = "0, NVIDIA GB10, [N/A], 35, 11.17, [N/A], [N/A]\n"  # this project's own query on a Spark
    text = ((FIX / "nvidia-smi-gb10/meminfo-excerpt.txt").read_text() + SECTION + "\n"
            "0.50 0.40 0.30 1/100 42\n" + SECTION + "\ncpu  10 0 10 80 0 0 0 0 0 0\n" + SECTION + "\n"
            + csv + SECTION + "\n")
    sample = parse_sample(text, [])
    assert sample.unified is True
    assert sample.mem_available == 118566368 * 1024 and sample.mem_total == 127600748 * 1024
    assert sample.gpus[0].name == "NVIDIA GB10"


def test_several_gpus() -> None:
    text = "0, NVIDIA H200, 100, 63, 690.62, 1011, 143771\n1, NVIDIA H200, 5, 41, 120.00, 0, 143771\n"
    gpus, _ = parse_gpus(text)
    assert [g.index for g in gpus] == [0, 1] and gpus[1].util_pct == 5
    assert not parse_sample(f"{SECTION}\n{SECTION}\n{SECTION}\n{text}{SECTION}\n", []).unified


def test_nvidia_smi_failing_is_a_note() -> None:
    gpus, note = parse_gpus("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                            "driver.\nnvidia-smi-failed\n")
    assert gpus == [] and note == "nvidia-smi-failed"


def test_this_host_without_nvidia_smi(tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = [str(tmp_path), str(tmp_path / "not" / "yet")]
    out = subprocess.run(sample_argv(paths), capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin"}).stdout
    sample = parse_sample(out, paths)
    assert sample.gpus == [] and sample.gpu_note == "no nvidia-smi" and sample.unified is False
    assert 0 < sample.mem_available <= sample.mem_total
    assert [d.path for d in sample.disks] == paths
    assert sample.disks[0].total == sample.disks[1].total > 0 and sample.disks[1].free > 0
    assert sample.cpu_ticks[1] > 0


def test_cpu_percent_from_two_samples() -> None:
    def at(busy: int, idle: int) -> str:
        return (f"MemTotal: 10 kB\n{SECTION}\n0.1 0.1 0.1 1/1 1\n{SECTION}\n"
                f"cpu  {busy} 0 0 {idle} 0 0 0 0\n{SECTION}\nno-nvidia-smi\n{SECTION}\n")
    a, b = parse_sample(at(100, 900), []), parse_sample(at(150, 1000), [])
    assert b.cpu_pct(a) == pytest.approx(100 * 50 / 150)
    assert a.cpu_pct(None) is None


def test_hostile_path_is_an_argument_not_code(tmp_path) -> None:  # type: ignore[no-untyped-def]
    evil = str(tmp_path / "$(touch pwned); `touch pwned2`")
    out = subprocess.run(sample_argv([evil]), capture_output=True, text=True, cwd=tmp_path).stdout
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    assert parse_sample(out, [evil]).disks[0].path == evil


def test_relative_tilde_and_option_paths_end_at_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each used to loop forever on the node (the parent walk never reached "/"): now each is
    answered "invalid" at once, and absolute paths still walk up to an existing folder."""
    paths = ["relative/dst", "~/dst", "-P", "", str(tmp_path / "not" / "yet")]
    started = time.monotonic()
    out = subprocess.run(sample_argv(paths), capture_output=True, text=True, timeout=5, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin"}).stdout
    assert time.monotonic() - started < 2
    assert out.count(INVALID) == 4
    assert [d.path for d in parse_sample(out, paths).disks] == [str(tmp_path / "not" / "yet")]
    assert not valid_path("~/x") and not valid_path("-P") and valid_path("/x")
