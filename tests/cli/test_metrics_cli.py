"""``sparktui top`` and ``sparktui watch --metrics`` on the local cluster, as processes: the
demo's numbers in ``top --once --json``; ``watch --metrics`` serving a body the Prometheus
client's parser reads back with every rank's state and the head's engine series, listening on
loopback only. Real demo ranks (fixed ports: run it in a private network namespace)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT
from tests.demo.test_engine import free_port
from tests.runner import Cli, local_cli, local_env

DEMO = "recipes/demo-tp4"


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    yield from local_cli(tmp_path, DEMO)


def listening(pid: int) -> set[tuple[str, int]]:
    """The TCP addresses the process listens on (IPv4, from /proc/<pid>/net/tcp of its sockets)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
            host, port = fields[1].split(":")
            ip = ".".join(str(int(host[i:i + 2], 16)) for i in (6, 4, 2, 0))
            out.add((ip, int(port, 16)))
    return out


def sigterm_caught(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (``SigCgt`` in its status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask >> (signal.SIGTERM - 1) & 1)


def test_top_once_and_watch_metrics(cli: Cli, tmp_path: Path) -> None:
    up = cli("up", DEMO, "--wait")
    assert up.returncode == 0, up.stderr
    cli("smoke", DEMO, "--n", "2")
    top = cli("top", DEMO, "--once", "--json", "--over", "0.5")
    assert top.returncode == 0, top.stderr
    head = json.loads(top.stdout)["ranks"][0]
    assert head["rank"] == 0 and head["stale"] is None and head["values"]["running"] == 0, head
    table = cli("top", DEMO, "--once", "--over", "0.2")
    assert "r0 local0" in table.stdout and "running" in table.stdout, table.stdout
    assert "TTFT p95" in table.stdout and "ago" in table.stdout, table.stdout

    # a watch stopped while it attaches ends cleanly: SIGTERM is taken before it says watching
    # (the chaos soak stopped one the moment it said so, and met -15 once under load)
    early = subprocess.Popen([sys.executable, "-m", "sparktui", "watch", DEMO, "--metrics",
                              str(free_port())], cwd=ROOT, env=local_env(tmp_path),
                             stdout=subprocess.DEVNULL, stderr=(tmp_path / "early.err").open("wb"))
    while early.poll() is None and not sigterm_caught(early.pid):
        time.sleep(0.005)
    said = (tmp_path / "early.err").read_text()  # read after the handler was seen
    early.send_signal(signal.SIGTERM)
    assert early.wait(30) == 0, (tmp_path / "early.err").read_text()
    assert "watching" not in said, said
    assert "Traceback" not in (tmp_path / "early.err").read_text()

    port = free_port()
    watch = subprocess.Popen([sys.executable, "-m", "sparktui", "watch", DEMO, "--metrics",
                              str(port)], cwd=ROOT, env=local_env(tmp_path),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        body, end = "", time.monotonic() + 30
        while "sglang:num_running_reqs" not in body:  # once a scrape of the head came in
            assert watch.poll() is None and time.monotonic() < end, watch.stderr.read() if watch.stderr else ""
            try:
                body = urllib.request.urlopen(url, timeout=2).read().decode()
            except OSError:
                time.sleep(0.2)
        assert listening(watch.pid) == {("127.0.0.1", port)}  # loopback only
        families = {f.name: f for f in text_string_to_metric_families(body)}
        ready = {s.labels["rank"] for s in families["sparktui_rank_state"].samples
                 if s.labels["state"] == "ready" and s.value == 1}
        assert ready == {"0", "1", "2", "3"}
        running = families["sglang:num_running_reqs"].samples
        assert [(s.labels["rank"], s.labels["node"]) for s in running] == [("0", "local0")]
        generated = families["sglang:prompt_tokens"]
        assert generated.type == "counter" and generated.samples[0].value > 0  # the two smokes
    finally:
        watch.send_signal(signal.SIGTERM)
        _, stderr = watch.communicate(timeout=30)
    assert watch.returncode == 0, stderr
    assert f"metrics for Prometheus on http://127.0.0.1:{port}/metrics" in stderr
    assert "no restart policy, nothing is restarted" in stderr
    assert "Traceback" not in stderr
