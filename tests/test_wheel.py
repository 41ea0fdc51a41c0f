"""sparktui installed like a tool: the wheel built with the standard build frontend, installed
into a fresh virtual environment, run from a folder outside the checkout.

The wheel and the environment are real; only the dependencies (textual, pydantic, ...) come
from this test environment's site-packages through a ``.pth`` line instead of a download, so
the test needs no network. sparktui itself is imported from the wheel (checked).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.wheel import build, install
from tests.conftest import ROOT

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh environment, a folder outside the checkout to run in)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build(tmp, sdist=True)
    assert list(wheel.parent.glob("sparktui-*.tar.gz")), "no sdist"
    venv = tmp / "venv"
    install(wheel, venv)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return venv, elsewhere


@pytest.fixture(scope="module")
def run(installed: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Run:
    venv, elsewhere = installed
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARKTUI_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '')}", HOME=str(home),
               XDG_CONFIG_HOME=str(home / "config"), XDG_STATE_HOME=str(home / "state"))

    def go(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=timeout)

    return go


def test_the_wheel_is_what_runs(run: Run, installed: tuple[Path, Path]) -> None:
    venv, _ = installed
    where = run("python", "-c", "import sparktui; print(sparktui.__file__)")
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    version = run("sparktui", "--version")
    assert version.returncode == 0 and version.stdout.startswith("sparktui "), version


def test_the_top_level_folders_are_package_data(run: Run, installed: tuple[Path, Path]) -> None:
    """``recipes/`` and ``themes/`` of the checkout's top level are in the wheel's package, file
    for file, and found there (not in a checkout)."""
    venv, _ = installed
    found = run("python", "-c", "from sparktui.config import shipped\n"
                "for name in ('recipes', 'themes', 'schema'): print(name, shipped(name))")
    folders = dict(line.split(" ", 1) for line in found.stdout.splitlines())
    assert set(folders) == {"recipes", "themes", "schema"}, found.stdout + found.stderr
    for name, where in folders.items():
        folder = Path(where)
        assert folder.is_relative_to(venv) and folder.parts[-2:] == ("sparktui", name), folder
        if name != "schema":
            ours = sorted(p.relative_to(ROOT / name) for p in (ROOT / name).rglob("*.toml"))
            assert ours and sorted(p.relative_to(folder) for p in folder.rglob("*.toml")) == ours, name


CONSOLE = """
import asyncio, json, sys
from sparktui.cli import parser
from sparktui.ui import console_app

async def main():
    app = console_app(parser().parse_args([]))
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        for _ in range(300):
            if main.ready.is_set():
                break
            await pilot.pause(0.05)
        print(json.dumps({"open": main.session.slug if main.session else None,
                          "recipes": [i.slug for i in main.infos],
                          "themes": app.theme_names, "theme": app.theme}))

asyncio.run(main())
"""


def test_the_console_opens_on_the_demo(run: Run) -> None:
    res = run("python", "-c", CONSOLE)
    assert res.returncode == 0, res.stderr[-3000:]
    seen = json.loads(res.stdout.strip().splitlines()[-1])
    assert seen["open"] == "demo-tp4"
    assert {"demo-tp4", "demo-vllm-tp4", "dsv41-flash-4x-mia"} <= set(seen["recipes"])
    shipped = {p.stem for p in (ROOT / "themes").glob("*.toml")}
    assert shipped and shipped <= set(seen["themes"])
    assert seen["theme"] == "sparktui-dark"
