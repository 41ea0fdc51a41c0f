"""Whether a recipe's ranks fit their nodes' memory, told before anything starts.

On a DGX Spark the GPU takes its memory from the box's own (unified memory): an engine that
takes more than there is does not fail with a CUDA out-of-memory error, it wedges the node and
often sparktui's SSH session with it. So ``up`` and ``doctor`` read, on every node, the model's
snapshot in the node's Hugging Face cache (each ``*.safetensors`` file's size and header), the
node's memory and its GPUs, and say per node "needs about X of Y free".

It is an ESTIMATE, and says what it counts:

- the weights each rank loads: a safetensors header gives every tensor's bytes (its
  ``data_offsets``); tensors of two or more dimensions are taken as sharded over the tensor
  parallel ranks (divided by TP), those of one dimension or none (norms, biases, scales) as
  replicated (whole on every rank). Engines replicate some matrices too (a small embedding, a
  router's gate) and quantize others at load, so the real figure differs by a few percent;
- the engine's memory fraction (SGLang ``--mem-fraction-static``, vLLM
  ``--gpu-memory-utilization``): the share of the GPU's memory it takes at start for the
  weights and its KV cache, applied to the node's pool: the box's ``MemTotal`` on a unified node
  (nvidia-smi reports no memory of its own there), each GPU's ``memory.total`` on a discrete
  one. A node with no GPU has nothing to apply it to: the weights alone are counted;
- what is free now: ``MemAvailable`` on a unified node or one without GPU, a discrete GPU's
  total less its use.

What cannot be known is said instead of guessed: no snapshot on the node (the engine may
download the model), a header that cannot be read, an engine that picks its fraction itself
(SGLang without the flag), a GPU that reports no figures. Activations, CUDA graphs, the CUDA
context and the Python processes come on top of the need, and other processes may take memory
between the check and the load: a node that "fits" by a few hundred MiB may still not.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sparktui.core.engines.argv import FlagUse, walk
from sparktui.core.engines.base import MemoryFraction
from sparktui.core.engines.flagtable import UNDERSCORE_ENGINES, FlagTable, load
from sparktui.core.errors import SparkError
from sparktui.core.meminfo import NodeMemory
from sparktui.core.telemetry import NodeSample
from sparktui.core.units import format_bytes

HEADER_CAP = 100 * 2**20
"""A header longer than this (100 MiB) is refused unread: a real one is under a few MiB (a
DeepSeek-V3 shard's is about 100 KiB), and the node sends every header over its connection."""
HEADERS_CAP = 4 * HEADER_CAP
"""All headers of one snapshot together: past this the rest are not read."""
MAX_FIGURE = 1 << 64
"""No byte count in a header is larger; a bigger one is no real file's."""
NO_GPU_NOTE = "no nvidia-smi"

# The node's side: one fixed Python program, the HF repo folder and the cap as its arguments
# (never spliced into it), run by ``python3 -I -S -c``: the login shell sees only the quoted
# word ``nodeshell.login_shell_command`` makes, whatever shell it is. Python rather than a
# shell script: a header's length is 8 binary bytes, and a 163-shard snapshot would cost
# four or five forks a file in sh (od, head, base64), about a second a node.
LISTING_SCRIPT = r"""
import base64, json, os, sys
repo, cap = sys.argv[1], int(sys.argv[2])
def text(s):
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
def say(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
snaps = os.path.join(repo, "snapshots")
try:
    revs = sorted(n for n in os.listdir(snaps) if os.path.isdir(os.path.join(snaps, n)))
except OSError as e:
    say(missing=text(snaps) + ": " + (e.strerror or "cannot be read"))
    sys.exit(0)
ref = None
try:
    with open(os.path.join(repo, "refs", "main"), "rb") as f:
        ref = text(f.read(200).decode("ascii", "replace").strip())
except OSError:
    pass
if ref in revs:
    rev = ref
elif len(revs) == 1:
    rev = revs[0]
else:
    say(missing=text(snaps) + (": no snapshot in it" if not revs else
        ": %d snapshots and no refs/main naming one of them" % len(revs)))
    sys.exit(0)
snap = os.path.join(snaps, rev)
say(snapshot=text(snap))
try:
    names = sorted(n for n in os.listdir(snap) if n.endswith(".safetensors"))
except OSError as e:
    say(missing=text(snap) + ": " + (e.strerror or "cannot be read"))
    sys.exit(0)
total = 0
for name in names:
    try:
        with open(os.path.join(snap, name), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                say(file=text(name), size=size, length=None)
                continue
            n = int.from_bytes(head, "little")
            if n > cap or total + n > 4 * cap:
                say(file=text(name), size=size, length=n, header=None)
                continue
            data = f.read(n)
            total += len(data)
    except OSError as e:
        say(file=text(name), error=e.strerror or "cannot be read")
        continue
    say(file=text(name), size=size, length=n, header=base64.b64encode(data).decode("ascii"))
"""


def listing_argv(repo_folder: str, python: str = "python3") -> list[str]:
    """The command that lists the snapshot of ``repo_folder`` (``repo_folder``)."""
    return [python, "-I", "-S", "-c", LISTING_SCRIPT, repo_folder, str(HEADER_CAP)]


_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def repo_folder(hf_cache: str, model: str) -> str | None:
    """Where the Hugging Face cache keeps ``model`` (``ORG/NAME``): ``{hf}/hub/models--ORG--NAME``;
    None when ``model`` is no repo id (a path: its weights are not looked for)."""
    if _REPO_ID.fullmatch(model) is None or ".." in model:
        return None
    return f"{hf_cache.rstrip('/') or '/'}/hub/models--{model.replace('/', '--')}"


class WeightsUnreadable(ValueError):
    """The snapshot's listing or one of its headers cannot be read; the text says why."""


@dataclass(frozen=True)
class FileWeights:
    """One safetensors file's tensors, summed: bytes to divide among the TP ranks and bytes
    every rank loads whole."""

    name: str
    sharded: int
    replicated: int
    tensors: int


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) \
        and 0 <= value <= MAX_FIGURE else None


def parse_header(data: bytes, file_size: int | None = None, name: str = "") -> FileWeights:
    """A safetensors header (the JSON after the 8-byte length) read for its tensors' bytes;
    ``file_size`` (the whole file's) bounds the offsets. ``WeightsUnreadable`` for anything
    that is no header."""
    if len(data) > HEADER_CAP:
        raise WeightsUnreadable(f"its header is {len(data)} bytes, more than the "
                                f"{format_bytes(HEADER_CAP)} read")
    try:
        header = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WeightsUnreadable(f"its header is no JSON ({str(exc)[:80]})") from None
    if not isinstance(header, dict):
        raise WeightsUnreadable("its header is no JSON object")
    sharded = replicated = count = 0
    end_of_data = 0
    for key, info in header.items():
        if key == "__metadata__":
            continue
        shown = key[:60]
        if not isinstance(info, dict):
            raise WeightsUnreadable(f"tensor {shown!r} has no dtype, shape and offsets")
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not isinstance(info.get("dtype"), str) or not isinstance(shape, list) \
                or any(_int(d) is None for d in shape):
            raise WeightsUnreadable(f"tensor {shown!r} has no dtype or shape")
        if not isinstance(offsets, list) or len(offsets) != 2:
            raise WeightsUnreadable(f"tensor {shown!r} has no data_offsets")
        begin, end = _int(offsets[0]), _int(offsets[1])
        if begin is None or end is None or end < begin:
            raise WeightsUnreadable(f"tensor {shown!r} has data_offsets {offsets!r:.60}")
        size = end - begin
        if len(shape) >= 2:
            sharded += size
        else:
            replicated += size
        count += 1
        end_of_data = max(end_of_data, end)
    if file_size is not None and 8 + len(data) + end_of_data > file_size:
        raise WeightsUnreadable(
            f"its tensors end at byte {8 + len(data) + end_of_data}, past the file's "
            f"{file_size} (an incomplete download?)")
    return FileWeights(name, sharded, replicated, count)


@dataclass(frozen=True)
class Snapshot:
    """What the node's listing found: the snapshot folder and its files, or why there is none."""

    folder: str | None
    files: tuple[FileWeights, ...] = ()
    missing: str = ""

    def rank_bytes(self, tp: int) -> int:
        """The bytes one of ``tp`` ranks loads: its share of the sharded tensors (rounded up),
        every replicated one whole."""
        sharded = sum(f.sharded for f in self.files)
        return -(-sharded // max(1, tp)) + sum(f.replicated for f in self.files)

    @property
    def total(self) -> int:
        return sum(f.sharded + f.replicated for f in self.files)


def _clean(value: object) -> str:
    """Text from the node: a string with no lone surrogate (it could not be printed)."""
    return str(value).encode("utf-8", "replace").decode("utf-8")[:300]


def parse_listing(text: str) -> Snapshot:
    """The output of ``listing_argv``: the snapshot and each file's weights (no snapshot:
    ``missing`` says why). ``WeightsUnreadable`` when a file or the output cannot be read."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise WeightsUnreadable("the listing printed nothing")
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            raise WeightsUnreadable(f"the listing printed {_clean(line)[:80]!r}") from None
        if not isinstance(entry, dict):
            raise WeightsUnreadable(f"the listing printed {_clean(line)[:80]!r}")
        entries.append(entry)
    first = entries[0]
    if "missing" in first:
        return Snapshot(None, missing=_clean(first["missing"]))
    if not isinstance(first.get("snapshot"), str):
        raise WeightsUnreadable("the listing named no snapshot")
    folder = _clean(first["snapshot"])
    if len(entries) > 1 and "missing" in entries[1]:
        return Snapshot(None, missing=_clean(entries[1]["missing"]))
    files = []
    for entry in entries[1:]:
        name = _clean(entry.get("file", "?"))
        if "error" in entry:
            raise WeightsUnreadable(f"{name}: {_clean(entry['error'])}")
        size, length = _int(entry.get("size")), entry.get("length")
        if size is None:
            raise WeightsUnreadable(f"{name}: no size")
        if length is None:
            raise WeightsUnreadable(f"{name}: shorter than a safetensors header ({size} bytes)")
        if _int(length) is None:
            raise WeightsUnreadable(f"{name}: no header length")
        header = entry.get("header")
        if header is None:
            raise WeightsUnreadable(
                f"{name}: a header of {length} bytes, more than the {format_bytes(HEADER_CAP)} "
                f"read (or past {format_bytes(HEADERS_CAP)} for all files)")
        if not isinstance(header, str):
            raise WeightsUnreadable(f"{name}: no header")
        try:
            data = base64.b64decode(header, validate=True)
        except (binascii.Error, ValueError):
            raise WeightsUnreadable(f"{name}: a header that is not base64") from None
        if len(data) != length:
            raise WeightsUnreadable(f"{name}: its header is {length} bytes, the file holds "
                                    f"{len(data)} of them")
        try:
            files.append(parse_header(data, size, name))
        except WeightsUnreadable as exc:
            raise WeightsUnreadable(f"{name}: {exc}") from None
    return Snapshot(folder, tuple(files))


# -- the engine's memory fraction ---------------------------------------------------------

@dataclass(frozen=True)
class Fraction:
    """The engine's share of the GPU's memory for this rank: from its args, else the flag
    table's default; ``value`` None when neither tells (``note`` says why)."""

    flag: str
    value: float | None
    given: bool  # written in the args (else the engine's default)
    note: str = ""


def fraction_default(engine: str, dest: str, engine_flags: str | None) -> float | None:
    """The flag's default in the engine's flag table (the recipe's ``engine_flags`` version,
    else the newest shipped); None where the parser has none (SGLang picks one at start)."""
    table = load(engine, engine_flags if engine_flags not in (None, "none") else None)
    flag = table.field(dest) if table is not None else None
    default = flag.default if flag is not None else None
    return float(default) if isinstance(default, (int, float)) and not isinstance(default, bool) \
        else None


def _sets(engine: str, rule: MemoryFraction, use: FlagUse) -> bool:
    """Whether ``use`` gives the fraction: the table's flag of that field, or, with no table
    (a fork's flags), one of its spellings (vLLM's ``_`` form too)."""
    if use.flag is not None:
        return use.flag.dest == rule.dest
    name = use.spelling
    if engine in UNDERSCORE_ENGINES and name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
    return name in rule.flags


def memory_fraction(engine: str, rule: MemoryFraction, command: Sequence[str],
                    default: float | None, table: FlagTable | None = None) -> Fraction:
    """The fraction a rank's command line gives, read as the engine's parser reads it
    (``engines.argv.walk`` over ``table``: ``--flag v``, ``--flag=v``, an abbreviation, the
    last one winning; with no table the flag's spellings only)."""
    shown = rule.flags[0]
    uses = [u for u in walk(table, command) if _sets(engine, rule, u)]
    found = bool(uses)
    text = uses[-1].values[0][1] if uses and uses[-1].values else None
    if not found:
        if default is None:
            return Fraction(shown, None, False, f"{shown} not set: the engine picks its share "
                                                "at start")
        return Fraction(shown, default, False)
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        return Fraction(shown, None, True, f"{shown} {(text or '')[:20]!r} is no share between 0 and 1")
    return Fraction(shown, value, True)


# -- a node's verdict ---------------------------------------------------------------------

Verdict = Literal["fits", "short", "unknown"]


@dataclass(frozen=True)
class NodeFit:
    """One node's verdict: ``fits``, ``short`` (does not fit) or ``unknown`` (``why``)."""

    node: str
    verdict: Verdict
    need: int | None = None
    free: int | None = None
    basis: str = ""  # how the need was counted
    why: str = ""  # unknown: why it cannot tell

    def figures(self) -> str:
        """``needs about 64.0 GiB of 12.3 GiB free``."""
        return f"needs about {format_bytes(self.need or 0)} of {format_bytes(self.free or 0)} free"

    def sentence(self) -> str:
        """The verdict without the node's name (doctor has a column for it)."""
        if self.verdict == "unknown":
            return f"cannot tell whether it fits: {self.why}"
        said = f"{self.figures()} ({self.basis})"
        return said if self.verdict == "fits" else f"{said}: it does not fit"

    def said(self) -> str:
        return f"{self.node}: memory: {self.sentence()}"

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "verdict": self.verdict, "need": self.need,
                "free": self.free, "basis": self.basis, "why": self.why}


def unknown(node: str, why: str) -> NodeFit:
    return NodeFit(node, "unknown", why=why)


def judge(node: str, snapshot: Snapshot, tp: int, hosted: int, fraction: Fraction,
          memory: NodeMemory, sample: NodeSample) -> NodeFit:
    """The verdict for a node that hosts ``hosted`` of ``tp`` TP ranks, from what was read.
    Need ~= max(the weights its ranks load, the fraction x its memory pool)."""
    if snapshot.folder is None:
        return unknown(node, f"no snapshot found ({snapshot.missing}); the engine may download "
                             "the model, whose size is not known here")
    if not snapshot.files:
        return unknown(node, f"no *.safetensors in {snapshot.folder} (weights in another "
                             "format are not counted)")
    weights = snapshot.rank_bytes(tp) * hosted
    basis = [f"weights {format_bytes(weights)}: {hosted} of {tp} TP ranks"]
    gpus = sorted(sample.gpus, key=lambda g: g.index)
    if not gpus and sample.gpu_note not in ("", NO_GPU_NOTE):
        return unknown(node, f"its GPUs could not be read: {sample.gpu_note}")
    pool: int | None
    if not gpus:
        pool, free = None, memory.available
        where = "MemAvailable"
    elif sample.unified:
        pool, free = memory.total, memory.available
        where = f"of {format_bytes(pool)} unified memory"
    else:
        used = gpus[:max(1, hosted)]
        if any(g.mem_total is None or g.mem_used is None for g in used):
            return unknown(node, "a GPU reports its memory total but not its use")
        pool = sum(g.mem_total or 0 for g in used)
        free = sum((g.mem_total or 0) - (g.mem_used or 0) for g in used)
        where = f"of {format_bytes(pool)} on {len(used)} GPU{'s' if len(used) > 1 else ''}"
    need = weights
    if pool is None:
        what = f"{fraction.flag} {fraction.value:g}" if fraction.value is not None else fraction.flag
        basis.append(f"no GPU: {what} has nothing to apply to, the weights alone counted "
                     "against MemAvailable")
    elif fraction.value is None:
        basis.append(f"{fraction.note}, the weights alone counted")
    else:
        share = int(fraction.value * pool)
        need = max(weights, share)
        default = "" if fraction.given else " (the engine's default)"
        basis.append(f"{fraction.flag} {fraction.value:g}{default} {where}: {format_bytes(share)}")
    verdict: Verdict = "fits" if need <= free else "short"
    return NodeFit(node, verdict, need, free, "; ".join(basis))


class WontFit(SparkError):
    """``up`` refused before starting anything: a node cannot hold what its ranks need."""

    def __init__(self, short: list[NodeFit]) -> None:
        self.short = short
        super().__init__("; ".join(f"{f.node}: {f.figures()} ({f.basis})" for f in short)
                         + "; nothing was started (free memory there, or give each node less "
                         "to hold; up --no-memory-check starts anyway)")
