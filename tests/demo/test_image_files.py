"""The test image holds the whole demo package (every module and fields.json), where
``python3 -m sparktui.demo.engine`` finds it: a module left out would fail only on the test
cluster. (tests/realparts boots it there; this checks the file list without docker.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui_testbed import image
from sparktui_testbed.config import DEMO_SRC, IMAGE_ENV
from tests.conftest import ROOT

HAS_BUSYBOX = any(Path(p).exists() for p in ("/bin/busybox", "/usr/bin/busybox"))


@pytest.mark.skipif(not HAS_BUSYBOX, reason="no busybox: the image's file list cannot be made here")
def test_the_image_holds_every_file_of_the_demo_package() -> None:
    assert DEMO_SRC == ROOT / "sparktui" / "demo"
    entries = image._image_entries()
    files = sorted(p.relative_to(DEMO_SRC).as_posix() for p in DEMO_SRC.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    assert {"engine.py", "lines.py", "rank.py", "fields.json"} <= set(files)
    held = sorted(arc.removeprefix("opt/sparktui/sparktui/demo/") for arc, e in entries.items()
                  if arc.startswith("opt/sparktui/sparktui/demo/") and e.kind == "file")
    assert held == files
    assert entries["opt/sparktui/sparktui/__init__.py"].data == b""  # none of the rest of sparktui
    assert "PYTHONPATH=/opt/sparktui" in IMAGE_ENV
