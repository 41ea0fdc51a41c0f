"""``sparktui status`` as one document: worked out by ``status`` itself, or kept by the follower.

``document`` is what ``status --json`` prints and what the CLI's text is written from
(``cli.render.status_lines``), whoever made it. A console or a ``watch`` that follows a run keeps
it in the run's folder (``StatusKeeper``, ``core.statusdoc``): a ``status`` beside it shows that
instead of asking every node again.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import TYPE_CHECKING, Any

from sparktui.backend.owners import held_groups
from sparktui.backend.watchdog import summary as watchdog_summary
from sparktui.core.statusdoc import KEEP_EVERY_S, write_status

if TYPE_CHECKING:
    from sparktui.backend.events import NodeTelemetry
    from sparktui.backend.orchestrator import Orchestrator
    from sparktui.core.runstore import Run


def node_json(t: NodeTelemetry) -> dict[str, object]:
    return {"node": t.node, "status": t.status, "detail": t.detail, "warnings": t.warnings,
            "sample": t.sample.to_json() if t.sample else None}


def document(orch: Orchestrator, nodes: list[dict[str, object]], allocation: str | None, *,
             watchdog: str | None, follower: str | None = None) -> dict[str, Any]:
    """What ``status`` shows of ``orch``'s recipe now. ``nodes``: ``node_json`` of each node's
    latest sample; ``watchdog``: ``backend.watchdog.summary``'s line; ``follower``: who keeps
    the document (``the console``, ``the watch``), None when ``status`` worked it out itself."""
    run = orch.run
    canary = orch.canary_state()
    stall = orch.stall()
    return {
        "recipe": orch.recipe.slug, "title": orch.recipe.title, "cluster": orch.cluster.name,
        "run": run.id if run else None, "plan_hash": orch.plan.plan_hash,
        "ranks": orch.status(), "checks": orch.checks.to_json(), "watchdog": watchdog,
        "canary": canary.to_json() if canary is not None else None,
        "owner": orch.owner, "held": [h.to_json() for h in orch.held],
        "held_phrases": held_groups(orch.held), "allocation": allocation,
        "stall": stall.to_json() if stall is not None else None, "nodes": nodes,
        "restart_hint": bool(orch.failures()) and any(r.has_container for r in orch.ranks),
        "source": {"follower": follower, "pid": os.getpid(), "at": time.time()},
    }


class StatusKeeper:
    """The follower's status document, written every ``KEEP_EVERY_S`` while it follows.

    The nodes are the telemetry the follower samples anyway (the console's, the watch's):
    never a call of their own; a follower that samples none keeps no document. The
    watchdog's line reads the run's events again only when the file grew."""

    def __init__(self, orch: Orchestrator) -> None:
        self.orch = orch
        self.written = 0
        self._events: tuple[int, str | None] | None = None  # (events.jsonl size, its line)

    def _watchdog(self, run: Run) -> str | None:
        try:
            size = (run.dir / "events.jsonl").stat().st_size
        except OSError:
            size = -1
        if self._events is None or self._events[0] != size:
            self._events = (size, watchdog_summary(run, self.orch.recipe.spec.restart))
        return self._events[1]

    def keep(self) -> bool:
        """Write the document once; False when it could not be (a full disk: ``status`` then
        finds it stale and asks the nodes itself)."""
        orch = self.orch
        run = orch.run
        latest = orch.sampled()
        if run is None or latest is None:  # a follower that samples no node (``up --wait``,
            return False                     # ``logs -f``): a status asks the nodes itself
        nodes: list[dict[str, object]] = [node_json(latest[n]) if n in latest else
                 {"node": n, "status": "waiting", "detail": "not sampled yet", "warnings": [],
                  "sample": None} for n in orch.node_names()]
        doc = document(orch, nodes, orch.allocation_said, watchdog=self._watchdog(run),
                       follower=orch.who)
        # masked as the run's files are: a detail or a last line may quote a secret
        text = json.dumps(orch.board.redactor.data(doc), separators=(",", ":"))
        ok = write_status(run.dir, text)
        self.written += ok
        return ok

    async def loop(self) -> None:
        while True:
            try:
                self.keep()
            except Exception as exc:  # a fault of its own: said, and status works it out itself
                self.orch.board.notice("warning", f"the status document is no longer kept: "
                                                  f"{type(exc).__name__}: {exc}")
                return
            await asyncio.sleep(KEEP_EVERY_S)
