"""The demo's ready and fatal lines (``sparktui/demo/lines.py``, one place) are the ones the
engine adapters expect: each engine's ready line is its adapter's, and every way the demo
imitates an engine's death prints a line the default fatal patterns catch. The demo cannot
import sparktui, so this test is what holds the two together."""

from __future__ import annotations

import pytest

from sparktui.core.engines import ENGINES, FATAL_LINES, engine
from sparktui.core.patterns import compile_pattern
from sparktui.demo import config, lines, sglang, vllm
from sparktui.demo.engine import PERSONALITIES
from sparktui.demo.log import Log

# The fatal patterns the demo never imitates (it has no GPU memory, no engine core to lose).
NOT_IMITATED = {"torch.OutOfMemoryError: CUDA out of memory", "EngineDeadError"}


def printed(name: str, text: str, rank: int = 0) -> str:
    """``text`` as the demo's rank prints it, prefix and all."""
    out: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> int:
            out.append(data)
            return len(data)

        def flush(self) -> None:
            pass

    Log(PERSONALITIES[name].log_style(rank), Sink())(text)  # type: ignore[arg-type]
    return b"".join(out).decode().rstrip("\n")


def catches(line: str) -> set[str]:
    """The default fatal patterns that match ``line``."""
    return {p for p in FATAL_LINES if compile_pattern(p).search(line)}


def test_every_engine_has_a_personality() -> None:
    assert set(PERSONALITIES) == set(ENGINES) == set(config.ENGINES)
    for name, personality in PERSONALITIES.items():
        assert personality.name == name
    assert PERSONALITIES["sglang"].lines is lines.SGLANG and PERSONALITIES["vllm"].lines is lines.VLLM


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_the_ready_line_is_the_adapters(name: str) -> None:
    demo = PERSONALITIES[name].lines
    adapter = engine(name)
    assert demo.ready == adapter.ready_line
    assert compile_pattern(adapter.ready_line).search(printed(name, demo.ready))


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_a_workers_ready_line_is_not_the_heads(name: str) -> None:
    """A worker's ready line must not pass for rank 0's (the ready check reads rank 0 only, but
    a recipe may widen it)."""
    worker = PERSONALITIES[name].lines.worker_ready.format(port=30001, rank=1, world=2)
    assert not compile_pattern(engine(name).ready_line).search(printed(name, worker, rank=1))


def fatal_lists(name: str) -> dict[str, list[str]]:
    """Every list of lines the demo prints when it imitates the engine's death."""
    crash = PERSONALITIES[name].lines.crash
    return {
        "crash while booting": crash(2, False, "--demo-fail-rank 2 during weight loading"),
        "crash when ready": crash(2, True, "--demo-fail-rank 2 --demo-fail-after 3"),
        "head: a worker died": lines.group_lost(0, 2, False, "10.0.0.1", 25000),
        "head: a worker shut down": lines.group_lost(0, 2, True, "10.0.0.1", 25000),
        "worker: the head died": lines.group_lost(3, 0, False, "10.0.0.1", 25000),
    }


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_imitated_death_is_caught_by_the_fatal_patterns(name: str) -> None:
    covered: set[str] = set()
    for what, found in fatal_lists(name).items():
        caught = set().union(*(catches(printed(name, line)) for line in found))
        assert caught, f"{name}, {what}: no line of it matches FATAL_LINES:\n" + "\n".join(found)
        covered |= caught
        assert found[-1].startswith("DEMO fatal: ") and found[-1].endswith(
            f"; exiting with code {lines.EXIT_SIMULATED if 'crash' in what else lines.EXIT_GROUP_LOST}")
    # a pattern renamed in FATAL_LINES, or one the demo stopped printing, shows here
    assert covered == set(FATAL_LINES) - NOT_IMITATED


def test_the_crash_is_each_engines_own() -> None:
    """SGLang's scheduler and vLLM's worker process: the traceback names the engine's files."""
    assert lines.SGLANG.crash(1, False, "x")[0] == f"Scheduler hit an exception: {lines.TRACEBACK}"
    assert lines.VLLM.crash(1, False, "x")[:2] == ["WorkerProc hit an exception (rank 1).", lines.TRACEBACK]
    assert any("/sglang/" in line for line in lines.SGLANG.crash(1, True, "x"))
    assert any("/vllm/" in line for line in lines.VLLM.crash(1, True, "x"))


def test_the_dumps_are_where_the_adapters_read_them() -> None:
    """The dump lines start with the adapter's marker, and vLLM's version line is its pattern's."""
    sg = sglang.dump(config.parse_config(["--model-path", "m"], env={}), {})
    vl = vllm.dump(config.parse_config(["--model", "m"], env={}), {})
    assert sg is not None and sg.startswith(engine("sglang").args_dump.marker)
    assert vl is not None and vl.startswith(engine("vllm").args_dump.marker)
    head = config.parse_config(["--model", "m"], env={})
    version = vllm.PERSONALITY.banner(head)[0]
    assert engine("vllm").args_dump.version(printed("vllm", version)) == vllm.VERSION
