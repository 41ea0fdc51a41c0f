"""What the benches that run the demo recipe on the local cluster share: the recipe edited for
the bench, its ports checked free, keys sent to the console as a terminal sends them, the
processes a run leaves behind, percentiles."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import unicodedata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def demo_recipe(folder: Path, slug: str, edits: list[tuple[str, str]], who: str) -> Path:
    """``recipes/demo-tp4`` with ``edits`` (each text found exactly once, or the bench stops
    naming it: a changed demo recipe must not quietly bench something else), written as
    ``folder/slug``; returns ``folder``."""
    text = (ROOT / "recipes" / "demo-tp4" / "recipe.toml").read_text()
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(f"{who}: recipes/demo-tp4/recipe.toml changed: {old.strip()!r} "
                             "not found once")
        text = text.replace(old, new)
    (folder / slug).mkdir(parents=True)
    (folder / slug / "recipe.toml").write_text(text)
    return folder


def world_edits(world: int) -> list[tuple[str, str]]:
    """The ``demo_recipe`` edits that make the demo recipe a group of ``world`` ranks (a node
    each): its node count, TP size and the rendezvous line its checks wait for."""
    return [
        ("\nrequired_nodes = 4\n", f"\nrequired_nodes = {world}\n"),
        ("\ntensor_parallel_size = 4\n", f"\ntensor_parallel_size = {world}\n"),
        ('\nTP_SIZE = "4"\n', f'\nTP_SIZE = "{world}"\n'),
        ("world=4 rank=...", f"world={world} rank=..."),
    ]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def send_key(app: Any, key: str) -> None:
    """One key event through the driver, as ``Pilot.press`` and a terminal's input thread send
    it, without Pilot's waits for an idle app."""
    from textual import events
    from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key

    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    try:
        char: str | None = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
    except KeyError:
        char = key if len(key) == 1 else None
    event = events.Key(key, char)
    event.set_sender(app)
    app._driver.send_message(event)


def leftover_pids(marker: str) -> list[int]:
    """Processes whose command line or environment names ``marker`` (the bench's temporary
    folder: demo ranks and their supervisors get XDG_STATE_HOME from the bench)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            blob = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob:
            found.append(int(proc.name))
    return found


def kill_leftovers(marker: str) -> tuple[list[int], list[int]]:
    """(what was still running after down, what survived SIGTERM and SIGKILL)."""
    pids: list[int] = []
    for _ in range(20):  # down returns once the ranks are stopped; their supervisors exit next
        pids = leftover_pids(marker)
        if not pids:
            return [], []
        time.sleep(0.25)
    found = list(pids)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        time.sleep(1.0)
        pids = [p for p in pids if Path(f"/proc/{p}").exists()]
    return found, pids


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]
