"""The layers of sparktui, checked from the source with ``ast`` (nothing is imported).

Every ``import`` and ``from ... import`` counts, at module level or inside a function (a lazy
import is still a dependency), under ``if TYPE_CHECKING:`` too. Layers, lowest first:

- ``agents``: programs that run on nodes or detached; standard library only, they import nothing
  from sparktui (not even each other, and no relative imports).
- ``demo`` (the demo engine, a standard-library package copied alone into the test image)
  imports only its own modules: nothing else of sparktui, not even the package's ``__init__``.
- ``core`` may import ``agents``; ``config`` (``sparktui/config.py``) may import ``core``;
  ``catalog`` (``sparktui/catalog.py``, the recipe catalog shared by ui and cli) may import
  ``core`` and ``config``.
- ``backend`` may import ``core``, ``agents`` and ``config``.
- ``ui`` may import ``backend``, ``core``, ``agents``, ``config`` and ``catalog``.
- ``cli`` may import anything but ``ui``; its exceptions (``EXCEPTIONS``) open the console and
  check its config.toml.

Each agent must also run as a lone file, as it does on a node: copied into an empty folder and
started with ``python -I -S <file> --help`` (no site-packages, so no installed sparktui).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sparktui"

# layer -> the layers it may import besides itself. "sparktui" is the package's own
# ``__init__.py`` (``__version__``); "__main__" is ``python -m sparktui``.
ALLOWED: dict[str, frozenset[str]] = {
    "agents": frozenset(),
    "demo": frozenset(),
    "core": frozenset({"agents"}),
    "config": frozenset({"core"}),
    "catalog": frozenset({"core", "config"}),
    "backend": frozenset({"core", "agents", "config"}),
    "ui": frozenset({"backend", "core", "agents", "config", "catalog"}),
    "__main__": frozenset({"cli"}),
    "sparktui": frozenset(),
}
ALLOWED["cli"] = frozenset(ALLOWED) - {"cli", "ui", "__main__"}  # anything but the console
# Layers that may not import even themselves: each file stands alone.
STANDALONE = frozenset({"agents"})
# (file, module, imported name) allowed against the rules above, with the reason.
EXCEPTIONS: dict[tuple[str, str, str], str] = {
    ("sparktui/cli/__init__.py", "sparktui.ui", "run_console"):
        "no command opens the console: imported lazily, only then",
    ("sparktui/cli/recipes.py", "sparktui.ui.settings", "load_settings"):
        "validate checks the console's config.toml (its binding ids are the console's): "
        "imported lazily, only when there are settings to check",
}
AGENTS = sorted(p.name for p in (PACKAGE / "agents").glob("*.py") if p.name != "__init__.py")


def layer_of_file(rel: Path) -> str:
    """``sparktui/core/plan.py`` -> ``core``; ``sparktui/config.py`` -> ``config``."""
    parts = rel.parts[1:]
    if len(parts) > 1:
        return parts[0]
    stem = Path(parts[0]).stem
    return "sparktui" if stem == "__init__" else stem


def layer_of_module(dotted: str) -> str | None:
    """``sparktui.core.plan`` -> ``core``; ``sparktui`` -> ``sparktui``; not ours -> None."""
    parts = dotted.split(".")
    if parts[0] != "sparktui":
        return None
    return parts[1] if len(parts) > 1 else "sparktui"


def _package_of(rel: Path) -> list[str]:
    parts = list(rel.with_suffix("").parts)
    return parts[:-1]  # a module's package; for ``__init__`` that is its own folder


def _targets(rel: Path, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(module, name) pairs one import statement reaches; name is "" for ``import x``."""
    if isinstance(node, ast.Import):
        return [(alias.name, "") for alias in node.names]
    if node.level:
        base = _package_of(rel)
        base = base[: len(base) - (node.level - 1)] if node.level - 1 <= len(base) else []
        module = ".".join([*base, *(node.module.split(".") if node.module else [])]) or "."
    else:
        module = node.module or ""
    pairs = []
    for alias in node.names:
        # ``from sparktui import core`` reaches the subpackage, not the package's __init__
        if module == "sparktui" and alias.name != "*" and alias.name in ALLOWED:
            pairs.append((f"sparktui.{alias.name}", alias.name))
        else:
            pairs.append((module, alias.name))
    return pairs


def violations_in(rel: Path, source: str) -> list[str]:
    """``file:line: rule: the import``, for every import of ``source`` that breaks a rule."""
    layer = layer_of_file(rel)
    if layer not in ALLOWED:
        return [f"{rel}:1: no layer rule for {layer!r}: add it to ALLOWED in tests/test_layers.py"]
    found = []
    for node in ast.walk(ast.parse(source, filename=str(rel))):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        text = ast.get_source_segment(source, node) or ast.unparse(node)
        where = f"{rel.as_posix()}:{node.lineno}"
        if isinstance(node, ast.ImportFrom) and node.level and layer in STANDALONE:
            found.append(f"{where}: {layer} imports nothing from sparktui (relative import): {text}")
            continue
        broken: dict[str, None] = {}  # one line per rule a statement breaks, in order
        for module, name in _targets(rel, node):
            target = layer_of_module(module)
            if target is None:
                if isinstance(node, ast.ImportFrom) and node.level:
                    broken[f"{where}: relative import leaves the package: {text}"] = None
                continue
            if (rel.as_posix(), module, name) in EXCEPTIONS:
                continue
            if layer in STANDALONE:
                broken[f"{where}: {layer} imports nothing from sparktui: {text}"] = None
            elif target != layer and target not in ALLOWED[layer]:
                broken[f"{where}: {layer} may not import {target}: {text}"] = None
        found += broken
    return found


def _sources() -> list[Path]:
    return sorted(p.relative_to(ROOT) for p in PACKAGE.rglob("*.py"))


def test_every_layer_has_files() -> None:
    """The scan sees the package (a wrong path would pass every rule)."""
    layers = {layer_of_file(rel) for rel in _sources()}
    expected = {"agents", "core", "config", "backend", "ui", "cli"}
    assert expected <= layers, f"no files found for {sorted(expected - layers)}"


def test_no_import_goes_up_a_layer() -> None:
    found = [v for rel in _sources() for v in violations_in(rel, (ROOT / rel).read_text())]
    assert not found, "imports against the layers:\n" + "\n".join(found)


def test_exceptions_are_still_needed() -> None:
    """An exception whose import is gone is removed from the list."""
    for (file, module, name), reason in EXCEPTIONS.items():
        tree = ast.parse((ROOT / file).read_text())
        reached = {pair for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                   for pair in _targets(Path(file), node)}
        assert (module, name) in reached, f"{file}: {module}.{name} ({reason}) is no longer imported"


@pytest.mark.parametrize(("rel", "source", "expected"), [
    ("sparktui/core/x.py", "def f():\n    from sparktui.backend.http import y\n",
     "sparktui/core/x.py:2: core may not import backend"),
    ("sparktui/core/x.py", "import sparktui.ui.app\n", "sparktui/core/x.py:1: core may not import ui"),
    ("sparktui/core/x.py", "from sparktui import demo\n", "sparktui/core/x.py:1: core may not import demo"),
    ("sparktui/backend/x.py", "from ..cli import ops\n", "sparktui/backend/x.py:1: backend may not import cli"),
    ("sparktui/backend/x.py", "from sparktui.ui.messages import M\n", "backend may not import ui"),
    ("sparktui/config.py", "from sparktui.backend import staging\n", "config may not import backend"),
    ("sparktui/cli/ops.py", "from sparktui.ui import run_console\n", "cli may not import ui"),
    ("sparktui/backend/x.py", "from sparktui.catalog import A, B\n", "backend may not import catalog"),
    ("sparktui/catalog.py", "from sparktui.backend.http import get\n", "catalog may not import backend"),
    ("sparktui/agents/x.py", "from . import sparse_rows\n", "agents imports nothing from sparktui"),
    ("sparktui/agents/x.py", "import sparktui.agents.local_shim\n", "agents imports nothing from sparktui"),
    ("sparktui/agents/x.py", "from sparktui import __version__\n", "agents imports nothing from sparktui"),
    ("sparktui/newthing/x.py", "import os\n", "no layer rule for 'newthing'"),
    ("sparktui/demo/x.py", "from sparktui.core.patterns import compile_pattern\n", "demo may not import core"),
    ("sparktui/demo/x.py", "from .. import __version__\n", "demo may not import sparktui"),
])
def test_the_checker_sees_upward_imports(rel: str, source: str, expected: str) -> None:
    found = violations_in(Path(rel), source)
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(("rel", "source"), [
    ("sparktui/ui/x.py", "from sparktui.backend.orchestrator import O\nfrom sparktui.config import state_dir\n"),
    ("sparktui/core/x.py", "from sparktui.agents.sparse_rows import row_range\nfrom .plan import Plan\n"),
    ("sparktui/cli/__init__.py", "def f():\n    from sparktui.ui import run_console\n"),
    ("sparktui/agents/x.py", "import json\nfrom pathlib import Path\n"),
    ("sparktui/demo/x.py", "from . import lines\nfrom .config import Config\nimport sparktui.demo.log\n"),
])
def test_the_checker_allows_downward_imports(rel: str, source: str) -> None:
    assert violations_in(Path(rel), source) == []


def test_there_are_agents() -> None:
    assert {"sparse_rows.py", "local_shim.py"} <= set(AGENTS)


@pytest.mark.parametrize("name", AGENTS)
def test_agent_runs_as_a_lone_file(name: str, tmp_path: Path) -> None:
    """As on a node: the file alone in a folder, no site-packages, no environment."""
    copy = tmp_path / name
    shutil.copyfile(PACKAGE / "agents" / name, copy)
    proc = subprocess.run([sys.executable, "-I", "-S", str(copy), "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:")


def _module_of(rel: Path) -> str:
    """``sparktui/cli/ops.py`` -> ``sparktui.cli.ops``; a package's ``__init__`` is the package."""
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(sources: dict[Path, str]) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` it imports (lazy ones too, as for the layers):
    ``from sparktui.cli import render`` reaches the module ``sparktui.cli.render``."""
    modules = {_module_of(rel): rel for rel in sources}
    graph: dict[str, set[str]] = {}
    for module, rel in modules.items():
        reached = graph[module] = set()
        for node in ast.walk(ast.parse(sources[rel], filename=str(rel))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target, name in _targets(rel, node):
                    found = next((m for m in (f"{target}.{name}", target) if m in modules), None)
                    if found is not None and found != module:
                        reached.add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other round (Tarjan's strongly connected
    components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle() -> None:
    """Two modules that import each other, even lazily, are one thing in two files, or a
    piece that belongs to neither (issue 25: ``cli/logs.py`` and ``cli/ops.py`` were)."""
    graph = import_graph({rel: (ROOT / rel).read_text() for rel in _sources()})
    assert graph["sparktui.cli.ops"], "the scan sees no imports"
    assert circles(graph) == []


def test_the_circle_check_sees_a_circle() -> None:
    sources = {
        Path("sparktui/cli/__init__.py"): "def f():\n    from sparktui.cli import c\n",
        Path("sparktui/cli/a.py"): "from sparktui.cli import b\n",
        Path("sparktui/cli/b.py"): "def g():\n    from sparktui.cli.a import x\n",
        Path("sparktui/cli/c.py"): "from sparktui.cli import parser\n",
        Path("sparktui/cli/d.py"): "from sparktui.cli import a, c\n",
    }
    assert circles(import_graph(sources)) == [["sparktui.cli", "sparktui.cli.c"],
                                              ["sparktui.cli.a", "sparktui.cli.b"]]
