"""LocalRuntime on real processes: ranks are detached, logged to disk, and outlive their creator."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.agents.local_shim import CONTINUED, MAX_LINE_BYTES, proc_start, proc_stat
from sparktui.backend.runtime import ContainerState, LogChunk, NameTaken
from sparktui.backend.runtimes.processes import LocalRuntime, pid_alive
from sparktui.core.rankspec import ContainerSpec

ROOT = Path(__file__).resolve().parents[2]
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")  # the width docker writes


def make_spec(name: str, code: str, env: dict[str, str] | None = None,
              labels: dict[str, str] | None = None, entrypoint: list[str] | None = None) -> ContainerSpec:
    return ContainerSpec(
        name=name, image="unused:latest",
        entrypoint=entrypoint if entrypoint is not None else ["python3", "-c"],
        command=[code] if entrypoint is None else [],
        env=env or {}, mounts=[], shm_size=None, gpus="none", devices=[], labels=labels or {},
    )


def _kill_everything(state_dir: Path) -> None:
    """Finalizer: no rank or supervisor of a test survives it (never this process, though)."""
    mine = {os.getpid(), os.getpgid(0)}
    for pids_file in state_dir.glob("*/pids.json"):
        try:
            pids = json.loads(pids_file.read_text())
        except (OSError, ValueError):
            continue
        child, shim = pids.get("child_pid"), pids.get("shim_pid")
        if child not in mine and pid_alive(child, pids.get("child_start")):
            with contextlib.suppress(OSError):
                os.killpg(child, signal.SIGKILL)
        if shim not in mine and pid_alive(shim, pids.get("shim_start")):
            with contextlib.suppress(OSError):
                os.kill(shim, signal.SIGKILL)


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "local"
    try:
        yield folder
    finally:
        _kill_everything(folder)


@pytest.fixture
def rt(state_dir: Path) -> LocalRuntime:
    return LocalRuntime(state_dir)


async def collect(rt: LocalRuntime, cid: str, cursor: str | None = None, follow: bool = True,
                  timeout: float = 8.0) -> tuple[list[tuple[str, str]], list[LogChunk]]:
    chunks: list[LogChunk] = []

    async def read() -> None:
        async for chunk in rt.logs(cid, cursor, follow=follow):
            chunks.append(chunk)

    await asyncio.wait_for(read(), timeout)
    return [line for c in chunks for line in c.lines], chunks


async def wait_for_line(rt: LocalRuntime, cid: str, text: str, timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines, _ = await collect(rt, cid, follow=False)
        if any(t == text for _, t in lines):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {cid}")


TICKER = "import time\ni = 0\nwhile True:\n    print('tick', i, flush=True)\n    i += 1\n    time.sleep(0.05)\n"


async def test_lines_timestamps_and_exit_code(rt: LocalRuntime) -> None:
    code = "import sys\nfor i in range(50):\n    print('line', i)\nsys.exit(3)\n"
    st = await rt.run(make_spec("count", code), {})
    assert st.id.startswith("local-") and st.name == "count"
    assert st.status in ("running", "exited") and st.image_id == "local"

    lines, chunks = await collect(rt, st.id)
    assert [t for _, t in lines] == [f"line {i}" for i in range(50)]
    stamps = [ts for ts, _ in lines]
    assert all(STAMP.match(ts) for ts in stamps), stamps[:3]
    assert stamps == sorted(stamps)

    done = await rt.inspect(st.id)
    assert done.status == "exited" and done.exit_code == 3 and not done.running
    assert done.started_at and done.finished_at and done.started_at <= done.finished_at
    assert await rt.image_id("whatever:tag") == "local"
    size = (rt.state_dir / st.id / "output.log").stat().st_size
    assert chunks[-1].cursor == str(size)


async def test_stop_is_prompt_and_records_sigterm(rt: LocalRuntime) -> None:
    st = await rt.run(make_spec("ticker", TICKER), {})
    await wait_for_line(rt, st.id, "tick 1")
    assert (await rt.inspect(st.id)).status == "running"

    t0 = time.monotonic()
    await rt.stop(st.id, timeout=5)
    assert time.monotonic() - t0 < 3
    done = await rt.inspect(st.id)
    assert done.status == "exited" and done.exit_code == 143  # docker's 128 + SIGTERM
    lines, _ = await collect(rt, st.id, timeout=3)  # follow ends: the rank has exited
    assert lines[0][1] == "tick 0"


async def test_stop_escalates_to_sigkill(rt: LocalRuntime) -> None:
    code = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('armed', flush=True)\nwhile True:\n    time.sleep(0.05)\n")
    st = await rt.run(make_spec("stubborn", code), {})
    await wait_for_line(rt, st.id, "armed")

    t0 = time.monotonic()
    await rt.stop(st.id, timeout=0.5)
    assert 0.4 < time.monotonic() - t0 < 4
    done = await rt.inspect(st.id)
    assert done.status == "exited" and done.exit_code == 137


async def test_resume_from_cursor_mid_stream(rt: LocalRuntime) -> None:
    code = "import time\nfor i in range(150):\n    print(i, flush=True)\n    time.sleep(0.01)\n"
    st = await rt.run(make_spec("stream", code), {})

    first: list[tuple[str, str]] = []
    cursor: str | None = None
    gen = rt.logs(st.id, None)
    try:
        async for chunk in gen:
            first += chunk.lines
            cursor = chunk.cursor
            if len(first) >= 20:
                break
    finally:
        await gen.aclose()  # type: ignore[attr-defined]
    assert (await rt.inspect(st.id)).status == "running", "the cursor must be taken while it writes"

    rest, _ = await collect(rt, st.id, cursor)
    assert [t for _, t in first + rest] == [str(i) for i in range(150)]
    assert len(rest) > 0
    again, _ = await collect(rt, st.id, str(sum(len(f"{ts} {t}\n".encode()) for ts, t in first + rest)),
                             follow=False)
    assert again == []


async def test_ranks_outlive_their_creator(rt: LocalRuntime, state_dir: Path) -> None:
    creator = f"""
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r})
from sparktui.backend.runtimes.processes import LocalRuntime
from sparktui.core.rankspec import ContainerSpec
spec = ContainerSpec(name="orphan", image="img", entrypoint=["python3", "-c"], command=[{TICKER!r}],
                     env={{"WHO": "creator"}}, mounts=[], shm_size=None, gpus="none", devices=[],
                     labels={{"sparktui.recipe": "demo", "sparktui.rank": "0"}})
st = asyncio.run(LocalRuntime(Path(sys.argv[1])).run(spec, {{"sparktui.run": "r1"}}))
print(st.id, st.status)
"""
    out = subprocess.run([sys.executable, "-c", creator, str(state_dir)], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0, out.stderr
    cid, status = out.stdout.split()
    assert status == "running"

    # The creator is gone; this process (another LocalRuntime) finds and follows its rank.
    found = await rt.find({"sparktui.recipe": "demo", "sparktui.run": "r1"})
    assert [s.id for s in found] == [cid] and found[0].running
    assert found[0].labels == {"sparktui.recipe": "demo", "sparktui.rank": "0", "sparktui.run": "r1"}
    await wait_for_line(rt, cid, "tick 2")

    # And a third process with its own LocalRuntime sees it running too.
    observer = f"""
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r})
from sparktui.backend.runtimes.processes import LocalRuntime
async def main():
    rt = LocalRuntime(Path(sys.argv[1]))
    (st,) = await rt.find({{"sparktui.rank": "0"}})
    lines = [t async for c in rt.logs(st.id, None, follow=False) for _, t in c.lines]
    print(st.id, st.status, lines[0])
asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", observer, str(state_dir)], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [cid, "running", "tick", "0"]

    await rt.stop(cid, timeout=5)
    assert (await rt.inspect(cid)).status == "exited"


def test_pid_reuse_guard(tmp_path: Path) -> None:
    me = os.getpid()
    real = proc_start(me)
    assert real is not None
    assert pid_alive(me, real) and pid_alive(me, None)
    assert not pid_alive(me, real + 12345)  # same pid, different process
    assert not pid_alive(None, None) and not pid_alive(0, None)

    # A meta whose recorded start time is not this process's: the pid was reused, the rank is gone.
    rt = LocalRuntime(tmp_path / "fake")
    folder = tmp_path / "fake" / "local-0123456789ab"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({
        "id": folder.name, "name": "ghost", "argv": ["x"], "env": {}, "labels": {"k": "v"},
        "image": "i", "created_at": "2026-01-01T00:00:00.000000Z"}))
    pids = {"shim_pid": me, "shim_start": real + 1, "child_pid": me, "child_start": real + 1,
            "started_at": "2026-01-01T00:00:00.000001Z"}
    (folder / "pids.json").write_text(json.dumps(pids))
    st = asyncio.run(rt.inspect(folder.name))
    assert st.status == "dead" and not st.running and st.labels == {"k": "v"}
    asyncio.run(rt.stop(folder.name, timeout=0.1))  # must not signal this (unrelated) process
    assert asyncio.run(rt.inspect(folder.name)).status == "dead"

    (folder / "pids.json").write_text(json.dumps({**pids, "shim_start": real, "child_start": real}))
    assert asyncio.run(rt.inspect(folder.name)).status == "running"
    (folder / "pids.json").unlink()  # never leave a record that points at this process


def test_zombie_is_not_alive() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = proc_start(proc.pid)
    deadline = time.monotonic() + 5
    while (stat := proc_stat(proc.pid)) is not None and stat[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pid_alive(proc.pid, start)
    proc.wait()


async def test_env_labels_and_interpreter(rt: LocalRuntime) -> None:
    code = ("import os, sys, sparktui\nprint(os.environ['SPARK_FOO'])\nprint(sys.executable)\n"
            "print(os.environ['PYTHONPATH'].split(os.pathsep)[0])\nprint(os.environ['HOME'] != '')\n")
    spec = make_spec("envy", code, env={"SPARK_FOO": "bar baz"}, labels={"a": "1", "b": "2"})
    st = await rt.run(spec, {"c": "3", "b": "two"})
    lines, _ = await collect(rt, st.id)
    assert [t for _, t in lines] == ["bar baz", sys.executable, str(ROOT), "True"]

    done = await rt.inspect(st.id)
    assert done.exit_code == 0 and done.labels == {"a": "1", "b": "two", "c": "3"}
    assert [s.id for s in await rt.find({"a": "1", "c": "3"})] == [st.id]
    assert [s.id for s in await rt.find({})] == [st.id]
    assert await rt.find({"a": "2"}) == []
    meta = json.loads((rt.state_dir / st.id / "meta.json").read_text())
    assert meta["env"] == {"SPARK_FOO": "bar baz"} and meta["name"] == "envy"
    assert meta["argv"][:2] == ["python3", "-c"] and meta["image"] == "unused:latest"


async def test_name_conflict_replace_and_remove(rt: LocalRuntime) -> None:
    """A taken name is ``NameTaken``, running or not: the runtime never removes a rank to make
    room (whose it is decides, in the Orchestrator); once removed, the name is free."""
    first = await rt.run(make_spec("same", TICKER), {"sparktui.owner": "a@x"})
    assert (await rt.named("same")) == await rt.inspect(first.id)
    assert first.created_at and first.created_at.endswith("Z")
    with pytest.raises(NameTaken, match="container name same is taken") as taken:
        await rt.run(make_spec("same", TICKER), {})
    assert taken.value.holder.id == first.id and taken.value.holder.labels == {"sparktui.owner": "a@x"}

    await rt.stop(first.id, timeout=5)
    with pytest.raises(NameTaken, match="exited"):
        await rt.run(make_spec("same", TICKER), {})
    assert (await rt.inspect(first.id)).status == "exited"
    await rt.remove(first.id)
    assert await rt.named("same") is None
    second = await rt.run(make_spec("same", "print('again')"), {})
    assert second.id != first.id
    assert (await rt.inspect(first.id)).status == "missing"
    lines, _ = await collect(rt, second.id)
    assert [t for _, t in lines] == ["again"]

    await rt.remove(second.id)
    assert (await rt.inspect(second.id)) == ContainerState(id=second.id, name="", status="missing")
    assert not (rt.state_dir / second.id).exists()
    await rt.remove(second.id)  # removing twice is fine

    running = await rt.run(make_spec("removed-while-running", TICKER), {})
    await rt.remove(running.id)
    assert (await rt.inspect(running.id)).status == "missing"


async def test_partial_lines_bad_bytes_and_long_lines(rt: LocalRuntime) -> None:
    code = ("import sys\nw = sys.stdout.buffer.write\nw(b'caf\\xff\\xfe\\n'); w(b'crlf\\r\\n')\n"
            "w(b'long:' + b'x' * 100000 + b'\\n')\nw(b'no newline at the end')\n")
    st = await rt.run(make_spec("bytes", code), {})
    lines, _ = await collect(rt, st.id)
    texts = [t for _, t in lines]
    assert texts[0] == "caf\ufffd\ufffd" and texts[1] == "crlf"
    assert texts[-1] == "no newline at the end"
    first, *rest = texts[2:-1]
    assert all(p.startswith(CONTINUED) for p in rest) and len(rest) >= 3
    rest = [p.removeprefix(CONTINUED) for p in rest]
    assert first + "".join(rest) == "long:" + "x" * 100000
    assert all(len(p) <= MAX_LINE_BYTES for p in [first, *rest])


async def test_batches_and_follow_false(rt: LocalRuntime) -> None:
    st = await rt.run(make_spec("many", "for i in range(5000):\n    print(i)\n"), {})
    deadline = time.monotonic() + 8
    while (await rt.inspect(st.id)).status != "exited" and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    lines, chunks = await collect(rt, st.id, follow=False)
    assert [t for _, t in lines] == [str(i) for i in range(5000)]
    assert len(chunks) >= 3 and all(len(c.lines) <= 2000 for c in chunks)
    # Every chunk boundary is a resume point with neither gap nor repeat.
    rest, _ = await collect(rt, st.id, chunks[0].cursor, follow=False)
    assert [t for _, t in rest] == [str(i) for i in range(len(chunks[0].lines), 5000)]


async def test_program_that_cannot_start(rt: LocalRuntime) -> None:
    st = await rt.run(make_spec("nope", "", entrypoint=["/nonexistent/engine", "--serve"]), {})
    assert st.status == "exited" and st.exit_code == 127
    lines, _ = await collect(rt, st.id)
    assert len(lines) == 1 and "cannot start" in lines[0][1] and "/nonexistent/engine" in lines[0][1]


async def test_unknown_id(rt: LocalRuntime) -> None:
    assert (await rt.inspect("local-000000000000")).status == "missing"
    assert await collect(rt, "local-000000000000") == ([], [])
    await rt.stop("local-000000000000")
    await rt.remove("local-000000000000")
    assert await rt.find({}) == []


QUIET = "import time\nprint('up', flush=True)\nwhile True:\n    time.sleep(0.05)\n"


async def wait_status(rt: LocalRuntime, cid: str, status: str, timeout: float = 8.0) -> ContainerState:
    deadline = time.monotonic() + timeout
    while (st := await rt.inspect(cid)).status != status and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return st


async def test_sigterm_to_supervisor_reaches_the_rank(rt: LocalRuntime) -> None:
    st = await rt.run(make_spec("forward", QUIET), {})
    await wait_for_line(rt, st.id, "up")
    pids = json.loads((rt.state_dir / st.id / "pids.json").read_text())
    assert pids["child_pid"] != pids["shim_pid"]
    assert os.getpgid(pids["child_pid"]) == pids["child_pid"]  # the rank leads its own group
    os.kill(pids["shim_pid"], signal.SIGTERM)
    done = await wait_status(rt, st.id, "exited")
    assert done.status == "exited" and done.exit_code == 143


async def test_stop_after_the_supervisor_was_killed(rt: LocalRuntime) -> None:
    st = await rt.run(make_spec("orphaned", QUIET), {})
    await wait_for_line(rt, st.id, "up")
    pids = json.loads((rt.state_dir / st.id / "pids.json").read_text())
    os.kill(pids["shim_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pid_alive(pids["shim_pid"], pids["shim_start"]) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert (await rt.inspect(st.id)).status == "running"  # the rank itself is still alive

    await rt.stop(st.id, timeout=5)
    done = await rt.inspect(st.id)
    assert done.status == "exited" and done.exit_code == 143  # recorded by stop in the shim's place
    assert not pid_alive(pids["child_pid"], pids["child_start"])


SECRET_ARGV = """\
import hashlib, os, sys, time
key, token = sys.argv[2], sys.argv[3].split("=", 1)[1]
cmdline = open("/proc/self/cmdline", "rb").read()
print("digests", hashlib.sha256(key.encode()).hexdigest(), hashlib.sha256(token.encode()).hexdigest())
print("on the command line:", key.encode() in cmdline or token.encode() in cmdline)
print("left in the environment:", "SPARKTUI_SECRET_ARGS" in os.environ)
print("printed:", key, token, flush=True)
sys.stdout.write("x" * ({cut} - 3) + key[:5])  # the line is cut for length across the key
sys.stdout.flush()
time.sleep(0.3)
print(key[5:], flush=True)
"""


async def test_secret_flags_reach_a_python_rank_through_its_environment(rt: LocalRuntime) -> None:
    import hashlib

    key, token = "sk-argv-secret-1", "hf-argv-secret-2"
    spec = make_spec("secret-argv", "", entrypoint=["python3", "-c", SECRET_ARGV.format(cut=MAX_LINE_BYTES)])
    spec = ContainerSpec(**{**spec.__dict__, "command": ["--api-key", key, f"--hf-token={token}"],
                            "env": {"HF_TOKEN": "hf-env-secret-3"}})
    st = await rt.run(spec, {})
    lines, _ = await collect(rt, st.id)
    texts = [t for _, t in lines]
    assert texts[:4] == [
        f"digests {hashlib.sha256(key.encode()).hexdigest()} {hashlib.sha256(token.encode()).hexdigest()}",
        "on the command line: False", "left in the environment: False", "printed: ******** ********"]
    assert "".join(t.removeprefix(CONTINUED) for t in texts[4:]) == "x" * (MAX_LINE_BYTES - 3) + "********"
    meta = json.loads((rt.state_dir / st.id / "meta.json").read_text())
    assert meta["argv"][-3:] == ["--api-key", "********", "--hf-token=********"]


async def test_a_secret_flag_is_not_given_to_a_program_on_its_command_line(rt: LocalRuntime) -> None:
    spec = make_spec("secret-echo", "", entrypoint=["/bin/echo", "--api-key", "sk-echo-secret-4"])
    st = await rt.run(spec, {})
    assert st.status == "exited" and st.exit_code == 127
    (line,), _ = await collect(rt, st.id)
    assert "through its environment only" in line[1] and "[env]" in line[1]
    assert "sk-echo-secret-4" not in line[1]
