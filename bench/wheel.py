"""sparktui as a user has it: the checkout built into a wheel by the standard build frontend and
installed into a fresh virtual environment (``tests/test_wheel.py`` tests that install; the
benches that time a command "as a user runs it" run that install's ``sparktui``).

Only the dependencies (textual, pydantic, ...) come from the running environment's
site-packages, through a ``.pth`` line, so nothing is downloaded. A checkout's own environment
holds sparktui as an editable install, whose import hook runs at every start (setuptools'
finder, from a ``.pth``: ``python -c pass`` 18 ms there, 8 ms here); most of that is imports
sparktui makes anyway, so its commands differ by a few ms, but only the wheel is what users run.
pip compiles the wheel's bytecode as it installs it, as for a user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache",
        ".ruff_cache", "snapshot_report.html"}


def _ignore(_folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in SKIP or n.endswith(".egg-info")}


def build(tmp: Path, *, sdist: bool = False) -> Path:
    """The wheel (and an sdist beside it) of a copy of the checkout: build/ and egg-info stay
    out of the checkout itself."""
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_ignore)
    dist = tmp / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", *(["--sdist"] if sdist else []),
                            "--no-isolation", "--outdir", str(dist), str(src)],
                           capture_output=True, text=True)
    if built.returncode:
        raise RuntimeError(f"python -m build failed:\n{built.stdout[-3000:]}{built.stderr[-3000:]}")
    (wheel,) = dist.glob("sparktui-*.whl")
    return wheel


def install(wheel: Path, venv: Path) -> Path:
    """A fresh environment at ``venv`` holding ``wheel``; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # without PYTHONPATH: a checkout on it that holds a sparktui.egg-info (an editable install
    # writes one) looks like sparktui already installed, and pip would skip the wheel
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                           "--no-index", "-q", str(wheel)], capture_output=True, text=True, env=env)
    if inst.returncode:
        raise RuntimeError(f"pip install {wheel.name} failed:\n{inst.stderr[-3000:]}")
    return py


def compiled() -> None:
    """The checkout's bytecode written out, for a bench that times the checkout's commands:
    with ``PYTHONDONTWRITEBYTECODE`` set (some shells and sandboxes set it) every new process
    would compile each module it imports, tens of ms that no installed copy pays."""
    import compileall

    compileall.compile_dir(str(ROOT / "sparktui"), quiet=1)
