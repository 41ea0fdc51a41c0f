"""The status document a follower keeps in its run's folder, and the check that it may be shown.

A console or a ``watch`` that follows a run (it holds ``follow.lock``) already knows everything
``sparktui status`` would work out: every rank's state from its containers' events and lines,
the boot checks, health from its probes, the engines, the nodes' telemetry, the allocation. It
writes that as ``status.json`` (``backend.statusdoc``) every ``KEEP_EVERY_S`` and at once when
it changes, so a ``status`` beside it reads one file instead of importing the backend,
connecting to every node and catching up (0.2 s instead of 0.7 s: issue 30).

The document is shown only while it is the truth: the process that wrote it still holds the
run, wrote it within ``FRESH_S``, for this run, this cluster and this plan (its hash covers the
recipe's every value), and samples every node now. Otherwise ``status`` works it out itself,
as before (and a node that does not answer is named, with why, by its own connect).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from sparktui.core.private import opener
from sparktui.core.runstore import Run

STATUS_FILE = "status.json"
KEEP_EVERY_S = 1.0
"""How often a follower writes the document (a line a second is what a status needs to be
current; writing 32 ranks' document costs about a millisecond)."""
FRESH_S = 10.0
"""A document older than this is not shown: its writer's loop is stuck (a node's call holding
it), so ``status`` asks the nodes itself."""


def write_status(run_dir: Path, text: str) -> bool:
    """``text`` (a document's JSON, secrets masked) as the run's status document, replaced
    whole (written aside, renamed: a reader never sees half of one), 0600. Not synced: one
    lost in a crash is rewritten a second later, and one left behind is never shown (its
    writer no longer holds the run). False when it could not be written (a full disk):
    nothing is left aside."""
    path = run_dir / STATUS_FILE
    tmp = run_dir / f".{STATUS_FILE}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8", opener=opener) as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def followed_status(run: Run, *, plan_hash: str, cluster: str, now: float) -> dict[str, Any] | None:
    """The status document of the process following ``run``, when it may be shown as the
    truth (see the module's docstring); None: ``status`` must work it out itself."""
    pid = run.follower_pid()
    if pid is None:
        return None
    try:
        doc = json.loads((run.dir / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    source = doc.get("source")
    if not isinstance(source, dict) or source.get("pid") != pid:
        return None  # another follower's, before this one wrote its first
    at = source.get("at")
    if not isinstance(at, (int, float)) or not now - FRESH_S <= at <= now + 1.0:
        return None
    if (doc.get("run"), doc.get("plan_hash"), doc.get("cluster")) != (run.id, plan_hash, cluster):
        return None
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or any(not isinstance(n, dict) or n.get("status") != "ok"
                                          for n in nodes):
        return None  # a node the follower cannot sample now: status asks it and says why
    return doc
