"""The console's grep over a run's files in a process of its own (``backend/history.py`` starts
one per group of ranks, as many as there are cores).

A scan in the console's own process took turns with the screen for the GIL: the scan ran at
half speed and every key waited for it. A process searches on a core of its own and says how
far it got every ``PROGRESS_S``; it imports only the grep (``core``), so it starts in some tens
of ms. Its job comes on stdin as JSON (``pattern``: what was typed, parsed here by the same
``LineFilter``; ``paths``: rank -> file; ``cap``), its frames go to stdout
(``grepwork.frame``): ``("p", kept so far, bytes read)`` while it scans, ``("c", kept, bytes
read)`` once every file is searched, then ``("r", lines, kept, scanned)``; or ``("e",
sentence)``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from sparktui.backend.grepwork import frame
from sparktui.core.blockgrep import BlockSearch
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import RunScan

PROGRESS_S = 0.05
NICE = 5
"""Set by the command that starts it (``history.scanner_command``), before its imports. The
scanner yields to the console's own process: on a machine with few cores the screen and
the keys come first, the scan takes what is left (it counts the CPU, not the key's wait)."""


def main() -> int:
    out = sys.stdout.buffer
    try:
        raw = sys.stdin.buffer.read()
        if not raw:  # started ahead, and the console went away before it had a job
            return 0
        job = json.loads(raw)
        paths = {int(rank): Path(path) for rank, path in job["paths"].items()}
        said = [time.monotonic()]

        def progress(scan: RunScan) -> None:
            now = time.monotonic()
            if scan.counted:  # the whole count, at once: the lines take a while more
                out.write(frame(("c", scan.count, scan.done_bytes)))
                out.flush()
            elif now - said[0] >= PROGRESS_S:
                said[0] = now
                out.write(frame(("p", scan.count, scan.done_bytes)))
                out.flush()

        scan = RunScan(paths, BlockSearch.of(LineFilter.parse(job["pattern"])), int(job["cap"]),
                       on_block=progress)
        result = scan.run()
        out.write(frame(("r", result.lines, result.total, result.scanned)))
        out.flush()
        return 0
    except BrokenPipeError:  # the console left: a new pattern, or it closed
        return 1
    except Exception as exc:  # said to the console, which raises it
        out.write(frame(("e", f"{type(exc).__name__}: {exc}"[:500])))
        out.flush()
        return 2


if __name__ == "__main__":
    sys.exit(main())
