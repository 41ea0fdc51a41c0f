"""Every map keyed by a rank state is total, and mypy says so: a test-only copy of the package
gains a state, and mypy reports each map (a function ``by_state`` builds a map from) that does
not say what the new state is. The maps are found in the source, so a new one is covered."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "sparktui"
NEW = "draining"
STATE_LINE = '"stopped", "restarting"]'  # the end of ``RankState`` in core/rankstate.py


def maps() -> dict[str, list[tuple[str, int, int]]]:
    """file (relative to the package) -> every function passed to ``by_state``, with the lines
    its body spans."""
    found: dict[str, list[tuple[str, int, int]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if "by_state(" not in text:
            continue
        tree = ast.parse(text)
        names = {node.args[0].id for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                 and node.func.id == "by_state" and node.args and isinstance(node.args[0], ast.Name)}
        defs = [(node.name, node.lineno, node.end_lineno or node.lineno) for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef) and node.name in names]
        if defs:
            found[str(path.relative_to(PACKAGE))] = sorted(defs)
    return found


def test_the_state_maps_are_found() -> None:
    found = maps()
    assert ("_moves" in [name for name, *_ in found["core/rankstate.py"]])  # TRANSITIONS
    assert ("_state_style" in [name for name, *_ in found["cli/render.py"]])  # STATE_STYLE


def test_a_new_state_is_reported_in_every_map_that_lacks_it(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    found = maps()
    copy = tmp_path / "sparktui"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    table = copy / "core" / "rankstate.py"
    text = table.read_text()
    assert text.count(STATE_LINE) == 1, "RankState's last state moved: update STATE_LINE"
    table.write_text(text.replace(STATE_LINE, f'"stopped", "restarting", "{NEW}"]'))
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / ".mypy_cache"), "--follow-imports=silent",
         "--no-error-summary", *(f"sparktui/{f}" for f in found)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr
    reported: dict[str, set[int]] = {}
    for m in re.finditer(r"^sparktui/(\S+?):(\d+): error: (.*)$", res.stdout, re.M):
        assert f"Literal['{NEW}']" in m.group(3), m.group(0)  # nothing else is wrong
        reported.setdefault(m.group(1), set()).add(int(m.group(2)))
    for file, defs in found.items():
        for name, start, end in defs:
            assert any(start <= line <= end for line in reported.get(file, ())), \
                f"mypy did not report {file}:{name} lacking {NEW!r}:\n{res.stdout}"
