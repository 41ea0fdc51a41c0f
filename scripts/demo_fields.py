"""Write ``sparktui/demo/fields.json``: what the demo engine needs of the shipped flag tables to
print SGLang's and vLLM's dumps of their arguments (each flag's spellings, field, kind, nargs
and default), so the stand-in's dump has every field the real engine's has. The demo engine runs
on bare CPython in the test image and cannot import sparktui; this copy travels with it.

    python scripts/demo_fields.py        # after scripts/engine_flags.py wrote new tables

tests/demo/test_args_dump.py fails when the file is not what this writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "sparktui" / "demo" / "fields.json"


def fields_json() -> str:
    sys.path.insert(0, str(ROOT))
    from sparktui.core.engines.flagtable import load

    data: dict[str, Any] = {}
    for name in ("sglang", "vllm"):
        table = load(name)
        assert table is not None, name
        data[name] = {"version": table.version, "flags": [
            [list(f.options), f.dest, f.kind, f.nargs, f.negatable, f.nullable, f.default]
            for f in table.flags]}
    return json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n"


if __name__ == "__main__":
    OUT.write_text(fields_json(), encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
