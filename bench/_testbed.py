"""The real test cluster for benchmarks: scripts/testbed.py loaded as a module (it is a script,
not part of the package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
NAME = "sparktui_testbed_script"


def testbed_module() -> ModuleType:
    if NAME in sys.modules:
        return sys.modules[NAME]
    spec = importlib.util.spec_from_file_location(NAME, ROOT / "scripts" / "testbed.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = mod  # before exec: its dataclasses look themselves up there
    spec.loader.exec_module(mod)
    return mod
