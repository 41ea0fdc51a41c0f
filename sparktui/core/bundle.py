"""One ``.tar.gz`` of a run for an upstream issue: its members gathered from the run's folder and
from what the caller made (plan views, verdicts, node facts), every byte masked, then written.

Every member's name is made here (``logs/r2.log``, ``nodes/node3.txt``): a name from outside (a
node's, a dump file's) enters only when it is a safe name (``core.names``), else it is left out
and the README says so. Members come in a fixed order, with their files' mtimes, owner root and
mode 0600; the gzip header carries no time: the same run gives the same bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sparktui.core.names import is_safe
from sparktui.core.private import opener
from sparktui.core.redact import Redactor
from sparktui.core.runstore import Run

MB = 1024 * 1024
DEFAULT_MAX_LOG_MB = 50
DUMPS = "dumps"  # ``<run dir>/dumps/``: the stack dumps, as the dump verb saves them
MAX_DUMP_DEPTH = 4


@dataclass(frozen=True)
class Member:
    """One file of the bundle: its name inside the archive (made by sparktui), its bytes
    (masked) and its time."""

    name: str
    data: bytes
    mtime: float


def encodings(value: str) -> list[str]:
    """The forms a secret takes in the files a bundle holds besides itself: inside a JSON string
    (escaped, and with non-ASCII as ``\\u`` escapes: ``json.dumps``' default) and in a URL
    (percent-encoded)."""
    forms = [json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             quote(value, safe=""), quote(value)]
    return [f for f in dict.fromkeys(forms) if f != value]


def bundle_redactor(values: Iterable[str]) -> Redactor:
    """Masks each secret value and its ``encodings``."""
    whole = list(values)
    return Redactor([*whole, *(form for v in whole for form in encodings(v))])


def masked(data: bytes, redactor: Redactor) -> bytes:
    """``data`` with every secret masked; bytes that are no UTF-8 go through unchanged."""
    if not redactor:
        return data
    text = data.decode("utf-8", "surrogateescape")
    return redactor.text(text).encode("utf-8", "surrogateescape")


def tail(path: Path, limit: int) -> tuple[bytes, int]:
    """The file's last ``limit`` bytes, from the start of a line, and how many bytes were cut
    before them (0: the whole file)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size <= limit:
            return f.read(), 0
        f.seek(size - limit - 1)
        data = f.read(limit + 1)  # with the byte before: a line may start right at the cut
    newline = data.find(b"\n")
    data = data[newline + 1:] if 0 <= newline < len(data) - 1 else data[1:]
    return data, size - len(data)


def _file(name: str, path: Path, redactor: Redactor) -> Member:
    return Member(name, masked(path.read_bytes(), redactor), path.stat().st_mtime)


@dataclass
class RunParts:
    """What a run's folder gives the bundle, and what was cut or left out (for the README)."""

    members: list[Member]
    notes: list[str]


def run_parts(run: Run, redactor: Redactor, max_log_bytes: int) -> RunParts:
    """plan.json, events.jsonl, each rank's log (its last ``max_log_bytes``) and the dumps
    folder of ``run``, masked."""
    members: list[Member] = []
    notes: list[str] = []
    for name in ("plan.json", "events.jsonl"):
        path = run.dir / name
        if path.is_file() and not path.is_symlink():
            members.append(_file(name, path, redactor))
        else:
            notes.append(f"{name}: the run has none")
    logs = run.rank_paths()
    if not logs:
        notes.append("logs: no rank of the run wrote a line")
    for rank, path in logs.items():
        if path.is_symlink():
            notes.append(f"logs/r{rank}.log: left out (a link, not the run's file)")
            continue
        data, cut = tail(path, max_log_bytes)
        members.append(Member(f"logs/r{rank}.log", masked(data, redactor), path.stat().st_mtime))
        if cut:
            notes.append(f"logs/r{rank}.log: the last {len(data):,} bytes only; the first "
                         f"{cut:,} bytes of the rank's log were cut (--max-log-mb)")
    dumps = run.dir / DUMPS
    if dumps.is_dir() and not dumps.is_symlink():
        found, skipped = _tree(dumps, DUMPS, 0)
        members += [_file(name, path, redactor) for name, path in found]
        notes += [f"{DUMPS}/: left out {what}" for what in skipped]
        if not found:
            notes.append(f"{DUMPS}/: the folder is empty")
    else:
        notes.append(f"{DUMPS}/: no stack dumps were taken in this run (sparktui dump)")
    return RunParts(members, notes)


def _tree(folder: Path, prefix: str, depth: int) -> tuple[list[tuple[str, Path]], list[str]]:
    """Regular files under ``folder`` as ``(member name, path)``, sorted; each part of a name a
    safe name, no link followed, at most ``MAX_DUMP_DEPTH`` folders deep."""
    found: list[tuple[str, Path]] = []
    skipped: list[str] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        shown = repr(entry.name)[:80]
        if not is_safe(entry.name):
            skipped.append(f"{shown} (no safe name)")
        elif entry.is_symlink():
            skipped.append(f"{shown} (a link)")
        elif entry.is_dir() and depth < MAX_DUMP_DEPTH:
            more, less = _tree(entry, f"{prefix}/{entry.name}", depth + 1)
            found += more
            skipped += less
        elif entry.is_file():
            found.append((f"{prefix}/{entry.name}", entry))
        else:
            skipped.append(f"{shown} (not a file)")
    return found, skipped


def text_member(name: str, text: str, redactor: Redactor, mtime: float) -> Member:
    return Member(name, masked(text.encode("utf-8", "surrogateescape"), redactor), mtime)


def node_member_name(index: int, node: str) -> str:
    """``nodes/<node>.txt`` for a node whose name is safe, else ``nodes/node-<index>.txt``."""
    return f"nodes/{node}.txt" if is_safe(node) else f"nodes/node-{index}.txt"


def write_bundle(path: Path, top: str, members: Sequence[Member]) -> int:
    """The archive at ``path`` (0600, written aside and renamed into place), every member under
    the folder ``top``, in the given order; returns its size. Blocking: run it in a thread."""
    if not is_safe(top):
        raise ValueError(f"bundle folder {top!r} is no safe name")
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        raise ValueError("two members of the bundle have one name")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        with open(tmp, "xb", opener=opener) as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
                    tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for member in members:
                    info = tarfile.TarInfo(f"{top}/{member.name}")
                    info.size = len(member.data)
                    info.mtime = int(member.mtime)
                    info.mode = 0o600
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    tar.addfile(info, io.BytesIO(member.data))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return path.stat().st_size
