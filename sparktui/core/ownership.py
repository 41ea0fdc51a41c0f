"""Who a rank's container belongs to: the owner label on every container sparktui makes, the
operator's own name, and the containers an operator took over from another owner (``--adopt``).

The shipped recipes give every operator the same container names and labels, so before owners
one operator's ``up`` reattached to another's run and their ``down`` removed it. Docker cannot
change a label on a container, so a takeover is recorded on the adopter's side
(``<state>/adopted.json``) until the adopter replaces or removes the container; containers that
are replaced carry the adopter's label from then on.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sparktui.core.private import private_dir, write_private

LABEL_OWNER = "sparktui.owner"
OWNER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$"
"""An owner as the cluster file may set it: ``alice@jumphost``, ``team-a``. It is a label and is
printed in sentences: no spaces, no control characters."""
MAX_OWNER = 128
UNLABELLED = "an older sparktui (no owner label)"
"""How a sparktui container made before owner labels is named: it belongs to nobody known, so it
is someone else's until adopted."""
ADOPTED_FILE = "adopted.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


def _part(text: str, fallback: str) -> str:
    """One half of ``user@machine`` reduced to the owner pattern's characters."""
    cleaned = _UNSAFE.sub("_", text).strip("_.+-")
    return cleaned or fallback


def default_owner() -> str:
    """``user@machine``: who runs this sparktui, where (the owner when the cluster file sets
    none). Two operators of one jump host differ by user; one operator on two machines by the
    machine, since each machine keeps its own runs and state."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no USER/LOGNAME and no passwd entry (a bare container)
        user = f"uid{os.getuid()}"
    owner = f"{_part(user, f'uid{os.getuid()}')}@{_part(socket.gethostname(), 'localhost')}"
    return owner[:MAX_OWNER]


def owner_of(labels: dict[str, str]) -> str | None:
    """The owner label of a container; None when it has none (made before owners)."""
    return labels.get(LABEL_OWNER)


def owner_name(owner: str | None) -> str:
    """An owner as a sentence names it."""
    return owner if owner else UNLABELLED


def when_text(ts: str | None) -> str:
    """A container's creation time for a sentence: ``2026-05-01 12:00:03 UTC``."""
    if not ts or ts.startswith("0001-"):
        return "an unknown time"
    base = ts.rstrip("Z").partition(".")[0].replace("T", " ")
    return f"{base[:19]} UTC"


class Adoptions:
    """The containers this state folder's operators took over: ``{container id: {"owner": the
    previous owner, "by": the adopter, "at": when}}`` in ``<state>/adopted.json`` (0600). An
    unreadable file counts as empty: adoption is a convenience on top of the labels, and the
    worst a lost entry does is ask for ``--adopt`` again."""

    def __init__(self, state_root: Path) -> None:
        self.path = state_root / ADOPTED_FILE

    def load(self) -> dict[str, dict[str, Any]]:
        try:
            with self.path.open(encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, dict)}

    def adopted_by(self, owner: str) -> set[str]:
        """The container ids ``owner`` took over."""
        return {cid for cid, entry in self.load().items() if entry.get("by") == owner}

    def add(self, container_id: str, previous: str | None, by: str) -> None:
        data = self.load()
        data[container_id] = {"owner": previous, "by": by,
                              "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        self._save(data)

    def forget(self, container_ids: list[str]) -> None:
        """Containers that are gone (removed, replaced): their entries go too."""
        data = self.load()
        if any(cid in data for cid in container_ids):
            self._save({k: v for k, v in data.items() if k not in container_ids})

    def _save(self, data: dict[str, dict[str, Any]]) -> None:
        private_dir(self.path.parent)
        write_private(self.path, json.dumps(data, indent=1, sort_keys=True))
