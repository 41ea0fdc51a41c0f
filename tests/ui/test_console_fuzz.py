"""The console never crashes: seeded random key sequences over the real console on the local
cluster, with demo ranks that boot, fail, restart and flood meanwhile (see ``tests/ui/fuzz.py``).

CI plays ``STEPS`` steps for each of ``SEEDS`` seeds. By hand, more:
``SPARKTUI_CONSOLE_FUZZ_SEEDS=100-110 SPARKTUI_CONSOLE_FUZZ_STEPS=2000 pytest -s tests/ui/test_console_fuzz.py``
(each seed prints its step and key counts).
After each seed: no exception escaped, the open recipe's ``x`` + ``y`` and a ``down`` of the
others leave no rank process, and every rank's file holds every tick line its engine printed,
once and in order.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.config import state_dir
from sparktui.core.runstore import MARKER
from sparktui.ui.options import ConsoleOptions
from tests.conftest import RECIPES, ROOT
from tests.ui import fuzz
from tests.ui.conftest import wait_for


def _seeds() -> list[int]:
    spec = os.environ.get("SPARKTUI_CONSOLE_FUZZ_SEEDS", "1-5")
    lo, _, hi = spec.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


SEEDS = _seeds()
STEPS = int(os.environ.get("SPARKTUI_CONSOLE_FUZZ_STEPS", "300"))
MIN_KEYS = 400  # per seed: five seeds press 2,000 keys at least
TICK = re.compile(r"demo tick (\d+)$")


def _variant(src: Path, dst: Path, name: str, port: int, env: dict[str, str]) -> None:
    text = (src / "recipe.toml").read_text()
    text = re.sub(r"(?m)^port = \d+", f"port = {port}", text)
    text = re.sub(r'"--served-model-name", "[^"]+"', f'"--served-model-name", "{name}"', text)
    text = text.replace('"--demo-boot-seconds", "2"', '"--demo-boot-seconds", "0.5"')
    for key in env:
        text = re.sub(rf"(?m)^{key} = .*\n", "", text)
    extra = "".join(f'{k} = "{v}"\n' for k, v in env.items())
    text = text.replace("[env]\n", "[env]\n" + extra, 1)
    (dst / name).mkdir(parents=True)
    (dst / name / "recipe.toml").write_text(text)


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    folder = tmp_path / "recipes"
    _variant(RECIPES / "demo-tp4", folder, "fuzz-a", 30700, {"SPARKTUI_DEMO_TICK": "0.2"})
    _variant(RECIPES / "demo-tp4", folder, "fuzz-b", 30800,
             {"SPARKTUI_DEMO_TICK": "0.2", "SPARKTUI_DEMO_FLOOD": "300", "SPARKTUI_DEMO_FAIL_RANK": "2",
              "SPARKTUI_DEMO_FAIL_AFTER": "6"})
    _variant(RECIPES / "demo-vllm-tp4", folder, "fuzz-v", 8700, {"SPARKTUI_DEMO_TICK": "0.2"})
    return folder


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparktui", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))


def _engines(names: list[str]) -> list[str]:
    """Demo engine processes of these recipes still alive, started by this test (its state
    folder is in their environment: another run on the machine is not this one's)."""
    mine = f"XDG_STATE_HOME={os.environ['XDG_STATE_HOME']}".encode()
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if "sparktui.demo.engine" in cmd and any(f"--served-model-name {n} " in cmd + " " for n in names) \
                and mine in environ:
            alive.append(f"{pid}: {cmd[:120]}")
    return alive


def _check_files(root: Path) -> int:
    """Every run's rank files: within each container's stretch (between restart markers) the
    tick lines are 1, 2, 3, ... with no gap and no repeat. Returns the ticks checked."""
    checked = 0
    for log in sorted(root.glob("*/r*.log")):
        stretch: list[int] = []
        for line in log.read_text(errors="replace").splitlines():
            text = line.partition("\t")[2]
            if text.startswith(MARKER):
                stretch = []
                continue
            m = TICK.search(text)
            if m:
                n = int(m.group(1))
                expected = stretch[-1] + 1 if stretch else 1
                assert n == expected, f"{log}: tick {n} after {stretch[-3:]} (gap or repeat)"
                stretch.append(n)
                checked += 1
    return checked


async def _dump_tasks_after(seconds: float, where: Path) -> None:
    """A hung run says where every task waits (the seed alone does not tell)."""
    await asyncio.sleep(seconds)
    with where.open("w") as f:
        for task in asyncio.all_tasks():
            print(f"--- {task.get_name()}: {task.get_coro()!r}", file=f)
            task.print_stack(file=f)


def _what_happened(seed: int, tmp_path: Path, exc: Exception) -> str:
    """A failure's message: the exception, then the step trace and the tasks' dump, if written
    (a CI log keeps the assertion message, not tmp_path)."""
    parts = [f"console fuzz seed {seed} failed: {type(exc).__name__}: {exc}"]
    for name in ("steps.txt", "tasks.txt"):
        path = tmp_path / name
        if path.is_file():
            parts.append(f"--- {path}:\n{path.read_text(errors='replace').rstrip()}")
        else:
            parts.append(f"--- {path}: not written")
    return "\n".join(parts)


@pytest.mark.parametrize("seed", SEEDS)
async def test_console_fuzz(seed: int, recipes: Path, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        await _fuzz_seed(seed, recipes, tmp_path, monkeypatch)
    except Exception as exc:  # an assertion among them: each says what happened, with the steps
        raise AssertionError(_what_happened(seed, tmp_path, exc)) from exc


async def _fuzz_seed(seed: int, recipes: Path, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["fuzz-a", "fuzz-b", "fuzz-v"]
    already = set(_engines(names))  # another run's leftovers are not this seed's
    dump = asyncio.create_task(_dump_tasks_after(STEPS * 0.5 + 120, tmp_path / "tasks.txt"))
    options = ConsoleOptions([recipes], None, state_root=state_dir(), recipe="fuzz-a", remember=False,
                             cursor_blink=False)
    app = fuzz.FuzzApp.made(options, monkeypatch)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            main = app.main_screen
            await wait_for(pilot, main.ready.is_set, 20, "the first recipe")
            await pilot.press("u")  # real events from the start
            played = await fuzz.run(pilot, seed, STEPS, names, trace=tmp_path / "steps.txt")
            await fuzz.take_down(pilot)
    finally:
        dump.cancel()
        for name in names:  # catch up what ran while not open, then down
            _cli("logs", str(recipes / name))
            _cli("down", str(recipes / name))
    left = set(_engines(names)) - already
    assert not left, left
    assert _check_files(state_dir() / "runs") > 0
    keys = fuzz.keys_in(played)
    print(f"console fuzz seed {seed}: {len(played)} steps, {keys} keys, no exception")
    assert STEPS < 300 or keys >= MIN_KEYS
