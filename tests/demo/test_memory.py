"""``--demo-alloc``: the demo rank really takes the memory it says, step by step, and holds it;
a size it cannot read is refused with the switch named."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def test_a_rank_takes_its_memory_in_steps_and_holds_it(tmp_path: Path) -> None:
    out = tmp_path / "rank.log"
    argv = [sys.executable, "-m", "sparktui.demo.engine", "--model-path", "demo", "--port", "0",
            "--demo-boot-seconds", "0.2"]
    with out.open("w") as f:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                env={"PATH": "/usr/bin:/bin", "SPARKTUI_DEMO_ALLOC": "192M",
                                     "SPARKTUI_DEMO_ALLOC_STEP": "64m", "SPARKTUI_DEMO_ALLOC_EVERY": "0.1"})
    try:
        base = 0
        end = time.monotonic() + 20
        while "holding 192 MiB of 192 MiB (step 3)" not in out.read_text():
            assert proc.poll() is None and time.monotonic() < end, out.read_text()
            base = base or _rss(proc.pid)
            time.sleep(0.05)
        steps = [line for line in out.read_text().splitlines() if "DEMO memory: holding" in line]
        assert [s.split("holding ")[1] for s in steps] == [
            "64 MiB of 192 MiB (step 1)", "128 MiB of 192 MiB (step 2)", "192 MiB of 192 MiB (step 3)"]
        time.sleep(0.5)
        assert _rss(proc.pid) >= 192 * 2**20, "the pages were written, so the kernel gave them"
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_a_size_it_cannot_read_is_refused() -> None:
    res = subprocess.run([sys.executable, "-m", "sparktui.demo.engine", "--model-path", "demo",
                          "--demo-alloc", "lots"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert "--demo-alloc: 'lots' is not a size such as 512M or 1G" in res.stderr


def test_alloc_once_takes_memory_the_first_time_only(tmp_path: Path) -> None:
    flag = tmp_path / "spike"
    env = {"PATH": "/usr/bin:/bin", "SPARKTUI_DEMO_ALLOC": "64M", "SPARKTUI_DEMO_ALLOC_ONCE": str(flag)}
    said = []
    for _ in range(2):
        out = tmp_path / "rank.log"
        with out.open("w") as f:
            proc = subprocess.Popen([sys.executable, "-m", "sparktui.demo.engine", "--model-path", "demo",
                                     "--port", "0", "--demo-boot-seconds", "0.2"], cwd=ROOT, stdout=f,
                                    stderr=subprocess.STDOUT, env=env)
        try:
            end = time.monotonic() + 20
            while "DEMO memory" not in out.read_text():
                assert proc.poll() is None and time.monotonic() < end, out.read_text()
                time.sleep(0.05)
            said.append([line.split("] ", 1)[1] for line in out.read_text().splitlines()
                         if "DEMO memory" in line])
        finally:
            proc.terminate()
            proc.wait(10)
    assert said[0] == ["DEMO memory: holding 64 MiB of 64 MiB (step 1)"]
    assert said[1] == [f"DEMO memory: {flag} exists: taking no memory this time"]
    assert flag.exists()
