"""Outside text is printed as text in every verb: a recipe whose values, and a demo rank whose log
lines, hold Rich markup and ANSI escapes give no traceback, print verbatim (escapes written out,
``\\x1b``; ``logs --raw`` keeps them), and ``up --wait``
reports the failed rank at once (it used to crash on ``[/red]`` and then hang until its timeout).

Runs real demo ranks on the local cluster (fixed ports: run it in a private network namespace).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import RECIPES, ROOT

DEMO = RECIPES / "demo-tp4" / "recipe.toml"
MARKUP = "[/red] [/] [link=http://x] [INST]"
ESC = "\x1b[31m"
HOSTILE = f"{MARKUP} {ESC}"
FLAG = "--x[/red][/][INST]" + ESC  # the demo logs the names of the flags it ignores
SERVED = "demo [link=http://x] [/]"  # and its served model name, in its server_args line
TRACEBACK = "Traceback (most recent call last):\n  File"
Cli = Callable[..., subprocess.CompletedProcess[str]]


def toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string (\u001b included)


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    """The demo recipe, its values full of markup; rank 2 crashes half way through its boot,
    and every rank logs a flag whose name is markup and an escape."""
    text = DEMO.read_text()
    text = text.replace('name = "Demo engine TP4 (sparktui demo engine, not a real model)"',
                        f"name = {toml_str('Demo ' + HOSTILE)}")
    text = text.replace('    "--demo-boot-seconds", "2",\n',
                        f'    "--demo-boot-seconds", "2",\n    {toml_str(FLAG)},\n')
    text = text.replace('"--served-model-name", "demo-tp4"', f'"--served-model-name", {toml_str(SERVED)}')
    text = text.replace('SPARKTUI_DEMO_TICK = "1"\n',
                        f'SPARKTUI_DEMO_TICK = "1"\nSPARKTUI_DEMO_FAIL_RANK = "2"\nNOTE = {toml_str(HOSTILE)}\n')
    text = text.replace('must_not_show = ["Traceback (most recent call last):"]',
                        f'must_not_show = ["Traceback (most recent call last):", {toml_str(MARKUP)}]')
    assert text.count(MARKUP) >= 3
    folder = tmp_path / "recipes" / "demo-markup"
    folder.mkdir(parents=True)
    (folder / "recipe.toml").write_text(text)
    return folder


@pytest.fixture
def cli(tmp_path: Path, recipe: Path) -> Iterator[Cli]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": "400",
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "HF_HOME": str(tmp_path / "hf")}
    env.pop("SPARKTUI_CLUSTER", None)

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "sparktui", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert TRACEBACK not in proc.stderr, proc.stderr
        assert "MarkupError" not in proc.stderr, proc.stderr
        return proc

    yield run
    run("down", str(recipe))


def shown(text: str) -> bool:
    """The markup verbatim, the escape written out (not obeyed by the terminal)."""
    flat = " ".join(text.split())
    return MARKUP in flat and "\\x1b[31m" in flat and "\x1b" not in text


def test_every_verb_prints_markup_as_text(cli: Cli, recipe: Path, tmp_path: Path) -> None:
    r = str(recipe)
    overview = cli("overview", "--recipes", str(recipe.parent))
    assert overview.returncode == 0 and shown(overview.stdout), overview.stdout
    validate = cli("validate", r)
    assert validate.returncode == 0, validate.stderr
    plan = cli("plan", r)
    assert plan.returncode == 0 and shown(plan.stdout), plan.stdout
    plan_json = json.loads(cli("plan", r, "--json").stdout)
    assert plan_json["recipe"]["name"] == f"Demo {HOSTILE}"  # JSON keeps it exactly
    assert plan_json["ranks"][0]["container"]["env"]["NOTE"] == HOSTILE
    assert shown(cli("plan", r, "--rank", "1").stdout)
    doctor = cli("doctor", r)
    assert doctor.returncode in (0, 1) and "local" in doctor.stdout
    stage = cli("stage", r)
    assert stage.returncode == 0 and "has no [[staging]] jobs" in stage.stderr

    started = time.monotonic()
    up = cli("up", r, "--wait")
    took = time.monotonic() - started
    assert up.returncode == 1, up.stdout + up.stderr
    # rank 2 crashed; under load another rank's fall may be seen first: a failure is named
    assert "first failure: rank " in up.stderr and "rank 2 (local2): failed" in up.stderr, up.stderr
    assert took < 60, f"up --wait took {took:.0f} s to report the failed rank (boot timeout 2m)"

    status = cli("status", r)
    assert status.returncode == 0 and shown(status.stdout), status.stdout
    status_json = json.loads(cli("status", r, "--json").stdout)
    assert status_json["ranks"][2]["state"] == "failed"
    logs = cli("logs", r, "--rank", "0")
    assert logs.returncode == 0
    # markup stays text; the escape is written out, obeyed only with --raw
    assert "--x[/red][/][INST]\\x1b[31m" in logs.stdout and "\x1b" not in logs.stdout, logs.stdout
    assert f"served_model_name={SERVED!r}" in logs.stdout, logs.stdout
    raw = cli("logs", r, "--rank", "0", "--raw")
    assert raw.returncode == 0 and FLAG in raw.stdout, raw.stdout
    grep = cli("logs", r, "--grep", "INST")
    assert grep.returncode == 0 and "[INST]" in grep.stdout
    restart = cli("restart", r, "--rank", "0")
    assert restart.returncode == 0, restart.stderr
    smoke = cli("smoke", r, "--max-tokens", "4")
    assert smoke.returncode in (0, 1)
    watch = cli("watch", r)  # the recipe has no restart policy: a sentence, exit 1
    assert watch.returncode == 1 and "no restart policy" in watch.stderr
    down = cli("down", r)
    assert down.returncode == 0, down.stderr
    assert cli("completion", "bash").returncode == 0
    assert cli("schema").returncode == 0
