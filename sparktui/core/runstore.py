"""A run's state directory: plan.json, events.jsonl, one log file per rank, the log cursors.

Logs are written as they arrive, so nothing is lost when sparktui exits and ``sparktui logs``
works afterwards. One process at a time follows a run's containers (it holds ``follow.lock``);
others read the files.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from sparktui.core.plan import Plan

MARKER = "--- sparktui: "


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ts_epoch(ts: str | None) -> float | None:
    """Seconds since the epoch from an RFC 3339 UTC timestamp (any fraction length)."""
    if not ts or ts.startswith("0001-"):
        return None
    base, _, frac = ts.rstrip("Z").partition(".")
    try:
        whole = datetime.strptime(base[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    digits = "".join(ch for ch in frac if ch.isdigit())[:9]
    return whole.timestamp() + (int(digits) / 10 ** len(digits) if digits else 0.0)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class RankLog:
    """``r<rank>.log``: one ``<timestamp>\\t<text>`` line per log line, numbered from 1."""

    path: Path
    count: int = -1

    def _ensure_count(self) -> None:
        if self.count < 0:
            self.count = 0
            if self.path.exists():
                with self.path.open("rb") as f:
                    self.count = sum(1 for _ in f)

    def append(self, lines: list[tuple[str, str]]) -> list[tuple[int, str, str]]:
        """Append and return ``(line_no, ts, text)`` for each line."""
        self._ensure_count()
        numbered = []
        buf = []
        for ts, text in lines:
            clean = text.replace("\n", " ").replace("\r", "")
            self.count += 1
            numbered.append((self.count, ts, clean))
            buf.append(f"{ts}\t{clean}\n")
        with self.path.open("a", encoding="utf-8", errors="replace") as f:
            f.write("".join(buf))
        return numbered

    def read(self, start: int = 1) -> Iterator[tuple[int, str, str]]:
        if not self.path.exists():
            return
        with self.path.open("r", encoding="utf-8", errors="replace") as f:
            for no, raw in enumerate(f, 1):
                if no < start:
                    continue
                ts, _, text = raw.rstrip("\n").partition("\t")
                yield no, ts, text

    @property
    def lines(self) -> int:
        self._ensure_count()
        return self.count


@dataclass
class Run:
    id: str
    dir: Path
    _logs: dict[int, RankLog] = field(default_factory=dict)
    _lock: IO[str] | None = None

    @property
    def plan_path(self) -> Path:
        return self.dir / "plan.json"

    def write_plan(self, plan: Plan) -> None:
        """Secrets stay masked on disk."""
        _atomic_write(self.plan_path, json.dumps(plan.to_json(show_secrets=False), indent=2))

    def read_plan(self) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self.plan_path.read_text())
            return data
        except (OSError, ValueError):
            return None

    def log(self, rank: int) -> RankLog:
        if rank not in self._logs:
            self._logs[rank] = RankLog(self.dir / f"r{rank}.log")
        return self._logs[rank]

    def event(self, kind: str, **data: Any) -> None:
        record = {"ts": utc_now(), "kind": kind, **data}
        with (self.dir / "events.jsonl").open("a") as f:
            f.write(json.dumps(record, default=str) + "\n")

    def events(self) -> list[dict[str, Any]]:
        path = self.dir / "events.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    # -- cursors: where each rank's container log was read up to --------------------------
    def cursors(self) -> dict[int, dict[str, str | None]]:
        try:
            raw = json.loads((self.dir / "cursors.json").read_text())
        except (OSError, ValueError):
            return {}
        return {int(k): v for k, v in raw.items()}

    def save_cursor(self, rank: int, container_id: str, cursor: str | None) -> None:
        all_ = self.cursors()
        all_[rank] = {"container_id": container_id, "cursor": cursor}
        _atomic_write(self.dir / "cursors.json", json.dumps({str(k): v for k, v in all_.items()}))

    # -- one follower at a time ----------------------------------------------------------
    def try_lock(self) -> bool:
        """Become this run's follower; False when another live process is."""
        if self._lock is not None:
            return True
        f = (self.dir / "follow.lock").open("a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            return False
        self._lock = f
        return True

    def unlock(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


class RunStore:
    """``<state>/runs/<id>/``; ids are ``<recipe slug>-<UTC time>`` so they sort by age."""

    def __init__(self, root: Path) -> None:
        self.root = root / "runs"

    def create(self, slug: str) -> Run:
        self.root.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        run_id = f"{slug}-{stamp}"
        n = 1
        while (self.root / run_id).exists():
            n += 1
            run_id = f"{slug}-{stamp}-{n}"
        (self.root / run_id).mkdir()
        return Run(run_id, self.root / run_id)

    def open(self, run_id: str) -> Run | None:
        d = self.root / run_id
        return Run(run_id, d) if d.is_dir() else None

    def latest(self, slug: str) -> Run | None:
        if not self.root.is_dir():
            return None
        runs = sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and p.name.startswith(f"{slug}-") and
                      p.name[len(slug) + 1:][:1].isdigit())
        return Run(runs[-1], self.root / runs[-1]) if runs else None
