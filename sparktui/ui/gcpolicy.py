"""How the console's process uses Python's cycle collector.

Textual leaves most rendered lines in a reference cycle (a ``Strip`` that a crop or a
compositor cut leaves whole caches itself), so under a log flood the collector has thousands of
short-lived cycles a second to reclaim. With CPython's default thresholds (700, 10, 10) young
collections came so often that each frame's lines, still on screen, were promoted to the oldest
generation; it filled up and forced a full collection every second or two, each walking every
object Python, Textual and the console ever made: 200-300 ms with the screen frozen
(docs/benchmarks.md, UI flood).

``settle`` changes two things, once, before the console starts: ``gc.freeze()`` moves what
exists then (modules, classes, functions: most of the process) out of the collector's reach, so
a full collection walks only what came later; and a larger first threshold lets a frame's lines
die before a young collection sees them, so they are freed young instead of piling up.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000  # allocations between young collections (CPython's default: 700)


def settle() -> None:
    """For the console's own process only (``run_console``; the UI flood bench does the same):
    tests that open many apps in one process must not freeze one app's objects for good."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
