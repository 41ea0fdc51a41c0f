"""Grep over a run's files at the pace of grep: a compiled regex over blocks of whole lines.

Line by line, Python spends about a microsecond on every line whatever the pattern (1 M lines of
a long run: 1.5 s where ``grep -E`` takes 0.12 s). Here a rank's file is read in blocks of whole
lines, the regex runs over a block in one call, in C, and Python only touches the lines it finds
(``core.blockgrep`` decides where to look; the rules stay in ``core.linefilter``): for
``sparktui logs`` every rank's kept lines merged in capture order (``rank_found``,
``merge_found``; written where they are searched and merged as bytes: ``rank_lines``,
``merge_lines``), for the console a scan that numbers them, keeps the newest and counts the rest
(``RunScan``), and the newest lines of a file (``tail``).

Lines are the ones ``RankLog.read`` yields: universal newlines (``\\r\\n`` and a lone ``\\r`` end a
line), UTF-8 with replacement characters, ``<ts>\\t<text>``.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from sparktui.core.blockgrep import BlockSearch

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from typing import Any, Final

BLOCK_BYTES: Final = 256 << 10
"""Bytes read and searched at once: a block stays in the CPU's cache between the read, the
search and the expansion of its hits (1 MiB and up read slower), and Python's cost per block
(some microseconds) is lost in 256 KiB."""

def norm_ts(ts: str) -> str:
    """``2026-01-01T12:00:05.100000000Z``: docker trims trailing zeros off the fraction and the
    local runtime writes microseconds; padded to nanoseconds, times sort as text."""
    if len(ts) == 30 and ts[19] == ".":
        return ts
    base, _, frac = ts.rstrip("Z").partition(".")
    return f"{base[:19]}.{frac[:9].ljust(9, '0')}Z"


def norm_ts_bytes(ts: bytes) -> bytes:
    """``norm_ts`` of a time stamp read as bytes (docker's trimmed nanoseconds padded without
    leaving bytes: a tenth of a real run's stamps)."""
    size = len(ts)
    if 20 < size <= 30 and ts[19] == 46 and ts[-1] == 90:  # ".", "Z"
        return ts if size == 30 else ts[:-1].ljust(29, b"0") + b"Z"
    return norm_ts(ts.decode("utf-8", "replace")).encode()


# -- reading a rank's file --------------------------------------------------------------------
Block = tuple[int, bytes, int, int]
"""``(file offset of data[0], data, lo, hi)``: ``data[lo:hi]`` holds whole lines."""


def blocks(path: Path, *, size: int = BLOCK_BYTES, limit: int | None = None,
           start: int = 0) -> Iterator[Block]:
    """A rank's file ``size`` bytes at a time, never copied again: a read's last, cut line is
    completed by the next read and comes alone, in a block of its own. Every line but perhaps
    the file's last ends with ``\\n``; ``\\r\\n`` and a lone ``\\r`` become ``\\n``, as
    ``RankLog.read`` (text mode) reads them, and a block never ends between the two. ``limit``:
    read no further than that many bytes (a file that grows: the same prefix, the same blocks).
    ``start``: from that byte on (the first of a line, after a ``\\n``)."""
    try:
        f = path.open("rb", buffering=0)
    except FileNotFoundError:
        return
    with f:
        if start:
            f.seek(start)
        offset = start  # of the next byte read
        rest = b""  # the start of a line cut by the last read
        while True:
            chunk = f.read(size if limit is None else min(size, limit - offset))
            if not chunk:
                break
            first = chunk.find(b"\n") + 1
            if not first:  # no line ends in it: a long line
                rest += chunk
                offset += len(chunk)
                continue
            lo = 0
            if rest:
                line = rest + chunk[:first]
                yield from _universal(offset - len(rest), line, 0, len(line))
                lo = first
            cut = chunk.rfind(b"\n") + 1
            if lo < cut:
                yield from _universal(offset, chunk, lo, cut)
            rest = chunk[cut:]
            offset += len(chunk)
        if rest:
            yield from _universal(offset - len(rest), rest, 0, len(rest))


def _universal(offset: int, data: bytes, lo: int, hi: int) -> Iterator[Block]:
    if data.find(b"\r", lo, hi) < 0:
        yield offset, data, lo, hi
        return
    lines = data[lo:hi].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    yield offset + lo, lines, 0, len(lines)


# -- the command line: kept lines of every rank, in capture order ------------------------------
Found = tuple[bytes, int, int, bytes]
"""A kept line for ``sparktui logs``: ``(time stamp, rank, place in the file, text)``, the stamp
normalised (``norm_ts``), the text UTF-8. Tuples compare in capture order."""


def _kept(path: Path, search: BlockSearch, size: int, start: int,
          limit: int | None) -> Iterator[tuple[int, int, Any, Any]]:
    """Each block of the file with kept lines: its offset, its region's start, the searched
    buffer (bytes, or the region decoded) and the kept lines' spans."""
    dense = False
    for offset, data, lo, hi in blocks(path, size=size, start=start, limit=limit):
        kept = search.kept(data, lo, hi, dense=dense)
        dense = kept.dense(dense)
        if kept.spans:
            yield offset, lo, kept.buf, kept.spans


def rank_found(path: Path, rank: int, search: BlockSearch, *, size: int = BLOCK_BYTES,
               start: int = 0, limit: int | None = None) -> Iterator[list[Found]]:
    """The kept lines of one rank's file, in file order, a block at a time (from byte
    ``start``, a line's first, to byte ``limit``: ``blocks``)."""
    norm = norm_ts_bytes
    for offset, lo, buf, spans in _kept(path, search, size, start, limit):
        if isinstance(buf, bytes):
            yield [((ts if len(ts := buf[start:t]) == 30 else norm(ts)), rank, offset + start,
                    buf[t + 1:end]) if t >= 0 else (norm(buf[start:end]), rank, offset + start, b"")
                   for start, t, end in spans]
        else:  # the region decoded: its characters counted from the region's first byte
            base = offset + lo
            yield [(norm(buf[start:t].encode()), rank, base + start, buf[t + 1:end].encode())
                   if t >= 0 else (norm(buf[start:end].encode()), rank, base + start, b"")
                   for start, t, end in spans]


def merged(paths: dict[int, Path], search: BlockSearch, *,
           size: int = BLOCK_BYTES) -> Iterator[list[Found]]:
    """Every rank's kept lines in capture order (``merge_found``), read in this process."""
    return merge_found({rank: rank_found(path, rank, search, size=size)
                        for rank, path in paths.items()})


def merge_found(sources: dict[int, Iterator[list[Found]]]) -> Iterator[list[Found]]:
    """Every rank's kept lines (``rank_found``'s batches, from wherever they are searched) in
    capture order, in batches as they are found: a batch goes out once every rank has been
    read past it. Only kept lines are merged, a batch with one ``list.sort`` (each rank's batch
    is a sorted run already). The order is ``heapq.merge``'s, as the console merges its windows:
    should a rank's time stamps go back (a clock stepped), the rest is merged by
    ``heapq.merge`` itself. ``merge_lines`` gives the same order, written."""
    streams = dict(sorted(sources.items()))
    return _merge(streams, {rank: [] for rank in streams}, {rank: None for rank in streams})


def _merge(streams: dict[int, Iterator[list[Any]]], pending: dict[int, list[Any]],
           last: dict[int, Any]) -> Iterator[list[Any]]:
    """``merge_found`` from a state: what each rank holds (``pending``) and its latest line
    (``last``); the items compare in capture order (``Found``, ``Line``)."""
    while streams:
        for rank in list(streams):
            if pending[rank]:
                continue
            batch = next(streams[rank], None)
            if batch is None:
                del streams[rank]
                continue
            pending[rank] = batch
            before = last[rank]
            if (before is not None and batch[0] < before) or batch != sorted(batch):
                # a clock stepped back: the general merge from here on
                yield from _chunks(heapq.merge(*(
                    itertools.chain(pending[r], _flat(streams[r])) if r in streams else pending[r]
                    for r in sorted(pending))))
                return
            last[rank] = batch[-1]
        if not streams:
            break
        yield _round(streams, pending)
    rest = _rest(pending)
    if rest:
        yield rest


def _round(streams: dict[int, Any], pending: dict[int, list[Any]]) -> list[Any]:
    """A merge's round: every rank's items up to the least of the ranks' last ones (no rank
    still streaming can bring one before it), taken from ``pending`` and sorted."""
    upto = min(pending[rank][-1] for rank in streams)
    out: list[Any] = []
    for rank, items in pending.items():
        cut = bisect.bisect_right(items, upto)
        if cut:
            out += items[:cut]
            pending[rank] = items[cut:]
    out.sort()
    return out


def _rest(pending: dict[int, list[Any]]) -> list[Any]:
    """What every rank still holds once none streams, sorted."""
    rest = [item for items in pending.values() for item in items]
    rest.sort()
    return rest


# -- the command line's lines, written by the ranks' searches ---------------------------------
STAMP: Final = 30
"""Bytes of a normalised time stamp (``norm_ts``): nearly every line's."""
KEY: Final = STAMP + 8 + 16
"""A record's key: the stamp, the rank in 8 hex digits and the place in 16 (0 for a line
whose stamp is greater than any before it in its rank's file: its stamp and rank alone say
where it goes). Of fixed widths, records compare as their lines' ``(stamp, rank, place)`` do,
whatever follows the key."""

Line = tuple[bytes, int, int, bytes]
"""A kept line as ``sparktui logs`` writes it, where a record cannot hold it (a stamp of
another length, stamps that go back): ``(stamp, rank, place, the line written)``; compares as
``Found`` does."""


class Form:
    """How ``sparktui logs`` writes a kept line: ``r<rank> ``, its time to the millisecond
    (``timestamps``), its text with control characters visible unless ``raw``."""

    __slots__ = ("raw", "timestamps")

    def __init__(self, *, timestamps: bool = False, raw: bool = False) -> None:
        self.timestamps = timestamps
        self.raw = raw


GATHER: Final = 1024
"""Records ``rank_lines`` gathers into a batch (from blocks that follow on): each batch of
every rank is a round of the merge, whose cost is the ranks' (32 bisects and slices), so
fewer and larger batches (about 200 KB) than a block's (some 150 lines of the grep bench)."""


def rank_lines(path: Path, rank: int, search: BlockSearch, form: Form, *,
               size: int = BLOCK_BYTES, start: int = 0,
               limit: int | None = None) -> Iterator[bytes | list[Line]]:
    """``rank_found``'s lines written as ``form`` says, for ``merge_lines``: records (each its
    key, then the line written) joined by newlines, at least ``GATHER`` at a time when there
    are so many, which the merge splits in one call, sorts as bytes and writes past their
    keys, all in C; or, for a block whose stamps are not all of ``STAMP`` bytes or go back, a
    list of ``Line``. This is the per-line work of the command, done where the search is (in
    the workers: the merge, one process for every rank, is the longer path)."""
    held: list[bytes] = []  # records of blocks that follow on
    count = 0
    last = b""  # the key of the last record held
    for batch in _rank_blocks(path, rank, search, form, size, start, limit):
        if held and not (isinstance(batch, bytes) and batch[:KEY] > last and count < GATHER):
            yield held[0] if len(held) == 1 else b"\n".join(held)
            held, count = [], 0
        if isinstance(batch, bytes):
            held.append(batch)
            count += batch.count(b"\n") + 1
            last = batch[batch.rfind(b"\n") + 1:][:KEY]
        else:
            yield batch
    if held:
        yield held[0] if len(held) == 1 else b"\n".join(held)


def _rank_blocks(path: Path, rank: int, search: BlockSearch, form: Form, size: int, start: int,
                 limit: int | None) -> Iterator[bytes | list[Line]]:
    """``rank_lines``' batches a block at a time."""
    from sparktui.core.controls import visible_bytes  # not the console's scanners' (grepscan)

    norm = norm_ts_bytes
    name = b"r%d " % rank
    head = b"%08x" % rank
    fits = 0 <= rank < 1 << 32
    stamped, raw = form.timestamps, form.raw
    whole = {STAMP}
    tied = head + b"0" * 16 + name  # a line's key and start where its place is not needed
    newest: bytes | None = b"" if start == 0 else None  # the greatest stamp so far (None: the
    # lines before ``start`` were not read)
    for offset, lo, buf, spans in _kept(path, search, size, start, limit):
        if isinstance(buf, bytes):
            base = offset
            stamps = [ts if len(ts := buf[s:t if t >= 0 else e]) == STAMP else norm(ts)
                      for s, t, e in spans]
            if fits and set(map(len, stamps)) == whole and stamps == sorted(stamps):
                if newest is not None and stamps[0] > newest and len(set(stamps)) == len(stamps):
                    # every stamp new to the rank: (stamp, rank) is the line's whole key, and
                    # the place (0 here) saves a format a line (30 % of the records' time)
                    if stamped:
                        records = [b"%s%s%s %s" % (ts, tied, ts[11:23], buf[t + 1:e] if t >= 0 else b"")
                                   for ts, (_s, t, e) in zip(stamps, spans, strict=True)]
                    else:
                        records = [ts + tied + buf[t + 1:e] if t >= 0 else ts + tied
                                   for ts, (_s, t, e) in zip(stamps, spans, strict=True)]
                elif stamped:
                    records = [b"%s%s%016x%s%s %s" % (ts, head, base + s, name, ts[11:23],
                                                       buf[t + 1:e] if t >= 0 else b"")
                               for ts, (s, t, e) in zip(stamps, spans, strict=True)]
                else:
                    records = [b"%s%s%016x%s%s" % (ts, head, base + s, name,
                                                   buf[t + 1:e] if t >= 0 else b"")
                               for ts, (s, t, e) in zip(stamps, spans, strict=True)]
                if newest is not None:
                    newest = max(newest, stamps[-1])
                joined = b"\n".join(records)
                if not raw and visible_bytes(joined) is not joined:  # a control somewhere
                    joined = b"\n".join([record[:KEY] + visible_bytes(record[KEY:])
                                         for record in records])
                yield joined
                continue
            texts = [buf[t + 1:e] if t >= 0 else b"" for _s, t, e in spans]
        else:  # the region decoded: its characters counted from the region's first byte
            base = offset + lo
            stamps = [norm(buf[s:t if t >= 0 else e].encode()) for s, t, e in spans]
            texts = [buf[t + 1:e].encode() if t >= 0 else b"" for _s, t, e in spans]
        if stamped:
            lines = [b"%s%s %s" % (name, ts[11:23], text) for ts, text in zip(stamps, texts, strict=True)]
        else:
            lines = [name + text for text in texts]
        if not raw:
            lines = [visible_bytes(line) for line in lines]
        if newest is not None:
            newest = max(newest, *stamps)
        if fits and set(map(len, stamps)) == whole and stamps == sorted(stamps):
            yield b"\n".join([b"%s%s%016x%s" % (ts, head, base + s, line)
                              for ts, (s, _t, _e), line in zip(stamps, spans, lines, strict=True)])
        else:
            yield [(ts, rank, base + s, line)
                   for ts, (s, _t, _e), line in zip(stamps, spans, lines, strict=True)]


def merge_lines(sources: dict[int, Iterator[bytes | list[Line]]], *,
                cutoff: bytes | None = None) -> Iterator[bytes]:
    """Every rank's lines (``rank_lines``) in ``merge_found``'s order, written: chunks of
    whole lines, one a merged batch, the lines stamped before ``cutoff`` left out. Records are
    merged as ``merge_found`` merges its batches, with bytes for tuples; from a ``Line`` batch
    or a rank's stamps that go back on, the rest is ``merge_found``'s own merge over ``Line``."""
    streams = dict(sorted(sources.items()))
    pending: dict[int, list[bytes]] = {rank: [] for rank in streams}
    last: dict[int, bytes | None] = {rank: None for rank in streams}  # each rank's latest record
    written = operator.itemgetter(slice(KEY, None))
    end = b" " * KEY  # the last record of a chunk: the newline after its last line
    while streams:
        for rank in list(streams):
            if pending[rank]:
                continue
            batch = next(streams[rank], None)
            if batch is None:
                del streams[rank]
                continue
            if isinstance(batch, bytes):
                records = batch.split(b"\n")
                before = last[rank]
                if before is None or not records[0] < before:
                    pending[rank] = records
                    last[rank] = records[-1]
                    continue
            yield from _written(_merge_rest(streams, pending, last, rank, batch), cutoff)
            return
        if not streams:
            break
        out: list[bytes] = _round(streams, pending)
        if not out:  # the rank of ``upto`` always gives its batch: its records were not sorted
            raise RuntimeError("merge_lines: a batch of records out of order")
        if cutoff is not None:
            out = _since(out, cutoff)
        if out:
            out.append(end)
            yield b"\n".join(map(written, out))
    rest: list[bytes] = _rest(pending)
    if cutoff is not None:
        rest = _since(rest, cutoff)
    if rest:
        rest.append(end)
        yield b"\n".join(map(written, rest))


def _since(records: list[bytes], cutoff: bytes) -> list[bytes]:
    """The sorted records stamped at ``cutoff`` or after: a record is ``>=`` a cutoff of up to
    ``STAMP`` bytes exactly when its stamp is."""
    if len(cutoff) <= STAMP:
        return records[bisect.bisect_left(records, cutoff):]
    return [record for record in records if record[:STAMP] >= cutoff]


def _as_line(record: bytes) -> Line:
    return record[:STAMP], int(record[STAMP:STAMP + 8], 16), int(record[STAMP + 8:KEY], 16), \
        record[KEY:]


def _lines(batch: bytes | list[Line]) -> list[Line]:
    return [_as_line(record) for record in batch.split(b"\n")] if isinstance(batch, bytes) else batch


def _merge_rest(streams: dict[int, Iterator[bytes | list[Line]]], pending: dict[int, list[bytes]],
                last: dict[int, bytes | None], rank: int,
                batch: bytes | list[Line]) -> Iterator[list[Line]]:
    """``_merge`` over ``Line`` from where ``merge_lines`` stands: ``rank`` just brought
    ``batch`` (its pending lines were none), which ``_merge`` takes first and checks again."""
    rest: dict[int, Iterator[list[Line]]] = {}
    for r, stream in streams.items():
        lines = map(_lines, stream)
        rest[r] = itertools.chain([_lines(batch)], lines) if r == rank else lines
    return _merge(rest, {r: _lines_of(records) for r, records in pending.items()},
                  {r: None if record is None else _as_line(record) for r, record in last.items()})


def _lines_of(records: list[bytes]) -> list[Line]:
    return [_as_line(record) for record in records]


def _written(batches: Iterator[list[Line]], cutoff: bytes | None) -> Iterator[bytes]:
    for batch in batches:
        lines = [line[3] for line in batch if cutoff is None or line[0] >= cutoff]
        if lines:
            lines.append(b"")
            yield b"\n".join(lines)


def _flat(batches: Iterator[list[Found]]) -> Iterator[Found]:
    for batch in batches:
        yield from batch


def _chunks(lines: Iterator[Found], size: int = 4096) -> Iterator[list[Found]]:
    batch: list[Found] = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# -- the console: numbered lines, the newest few kept, a live count -----------------------------
LogLine = tuple[str, int, int, str]
"""One captured line as the console keeps it (``ui/logstore.py``): ``(ts, rank, no, text)``.

``ts`` is the capture time, RFC 3339 UTC with nanoseconds (``norm_ts``); ``no`` the line number
in the run's file of that rank, from 1. Tuples compare in capture order: time, then rank, then
line number. A plain tuple on purpose, not a NamedTuple: CPython stops tracking a tuple of
strings and ints in its cycle collector after the first collection, but keeps tracking every
instance of a tuple subclass. The windows hold tens of thousands of lines; tracked, each full
collection walked them all and stopped the console for 200-300 ms under a log flood
(docs/benchmarks.md, UI flood)."""


_Kept = tuple[int, int, "Any", int]
"""A kept line between the passes: ``(block index, start in its buffer, the line, where its tab
is from the start)``; the line is bytes or, from a decoded block, text."""


def file_size(path: Path) -> int:
    """0 for a file that is not there (yet)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


class ScanResult:
    """What a scan found (plain, not a NamedTuple: no ``typing`` on the path of
    ``sparktui logs``)."""

    __slots__ = ("lines", "scanned", "total")

    def __init__(self, lines: list[LogLine], total: int, scanned: dict[int, int]) -> None:
        self.lines = lines  # the newest ``cap`` kept lines, in capture order
        self.total = total  # every kept line
        self.scanned = scanned  # per rank, the last line number read

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ScanResult) and (self.lines, self.total, self.scanned) == (
            other.lines, other.total, other.scanned)

    __hash__ = None  # type: ignore[assignment]  # holds lists

    def __repr__(self) -> str:
        return f"ScanResult({len(self.lines)} lines, total={self.total}, scanned={self.scanned})"


class RunScan:
    """A scan of some ranks' files for the console: the kept lines with their numbers (the
    newest ``cap``), a count that grows as it goes (read from another thread, or reported by
    ``on_block`` after each block), and a stop. ``run`` in a thread; ``cancel`` from anywhere."""

    def __init__(self, paths: dict[int, Path], search: BlockSearch, cap: int, *,
                 size: int = BLOCK_BYTES, on_block: Callable[[RunScan], None] | None = None) -> None:
        self.paths = paths
        self.search = search
        self.cap = cap
        self.size = size  # about 0.2 ms of C per block: the event loop gets the GIL often
        self.on_block = on_block
        self.count = 0  # kept lines so far
        self.counted = False  # every file searched: ``count`` is the whole (the lines come after)
        self.done_bytes = 0
        self.total_bytes = 0  # the files' sizes when the scan started
        import threading  # the console's: not on the path of ``sparktui logs`` (1 ms)

        self._stop = threading.Event()

    @property
    def fraction(self) -> float:
        """The share of the files read so far (a file may grow meanwhile: at most 1)."""
        return min(1.0, self.done_bytes / self.total_bytes) if self.total_bytes else 0.0

    def cancel(self) -> None:
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def run(self) -> ScanResult:
        """Two passes: the search, which makes the whole count (``counted``, said at once),
        then the numbers of the newest ``cap`` kept lines, made from a second read of the same
        bytes (from the page cache: counting a run's newlines takes a third of the search's
        time, and the count need not wait for it)."""
        sizes = {rank: file_size(path) for rank, path in self.paths.items()}
        self.total_bytes = sum(sizes.values())
        found: list[tuple[int, deque[_Kept]]] = []
        for rank, path in sorted(self.paths.items()):
            kept: deque[_Kept] = deque(maxlen=max(self.cap, 0))
            self._search(path, sizes[rank], kept)
            found.append((rank, kept))
        if not self.cancelled:  # the count is known before the newest lines are made
            self.counted = True
            if self.on_block is not None:
                self.on_block(self)
        per_rank: list[list[LogLine]] = []
        scanned: dict[int, int] = {}
        for rank, kept in found:
            lines, scanned[rank] = self._number(rank, self.paths[rank], sizes[rank], kept)
            per_rank.append(lines)
        lines = list(heapq.merge(*per_rank))
        return ScanResult(lines[-self.cap:] if self.cap > 0 else [], self.count, scanned)

    def _search(self, path: Path, limit: int, kept: deque[_Kept]) -> None:
        """The first pass over a rank's file: its kept lines counted, the newest into
        ``kept`` with the block they are in and where."""
        dense = False
        room = kept.maxlen or 0
        for index, (_offset, data, lo, hi) in enumerate(blocks(path, size=self.size, limit=limit)):
            if self.cancelled:
                break
            block = self.search.kept(data, lo, hi, dense=dense)
            dense = block.dense(dense)
            spans = block.spans
            if spans and room:
                buf = block.buf
                for start, t, end in spans[-room:]:
                    kept.append((index, start, buf[start:end], t - start))
            self.count += len(spans)
            self.done_bytes += block.hi - block.lo
            if self.on_block is not None:
                self.on_block(self)

    def _number(self, rank: int, path: Path, limit: int,
                kept: deque[_Kept]) -> tuple[list[LogLine], int]:
        """The second pass: the same blocks again, their newlines counted, the kept lines
        numbered (a block that held some is searched as the first pass searched it: as bytes
        or decoded). Returns the lines and the number of the last line read."""
        lines: list[LogLine] = []
        todo = iter(kept)
        nxt = next(todo, None)
        no = 0  # lines before the block
        for index, (_offset, data, lo, hi) in enumerate(blocks(path, size=self.size, limit=limit)):
            if self.cancelled:
                break
            if nxt is None or nxt[0] != index:
                no += data.count(b"\n", lo, hi) + (0 if data[hi - 1:hi] == b"\n" else 1)
                continue
            buf: Any = data
            if not isinstance(nxt[2], bytes):  # searched decoded: its places are characters
                buf = data[lo:hi].decode("utf-8", "replace")
                lo, hi = 0, len(buf)
            nl: Any = b"\n" if isinstance(buf, bytes) else "\n"
            at = lo
            while nxt is not None and nxt[0] == index:
                _index, start, line, tab = nxt
                no += buf.count(nl, at, start)
                at = start
                lines.append(_line(rank, no + 1, line, tab))
                nxt = next(todo, None)
            no += buf.count(nl, at, hi) + (0 if buf[hi - 1:hi] == nl else 1)
        return lines, no


def _line(rank: int, no: int, line: bytes | str, tab: int) -> LogLine:
    """``tab`` counts in ``line``'s own units: bytes of a UTF-8 block, characters of a decoded one."""
    if tab < 0:
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        return norm_ts(text), rank, no, ""
    if isinstance(line, bytes):
        return (norm_ts(line[:tab].decode("utf-8", "replace")), rank, no,
                line[tab + 1:].decode("utf-8", "replace"))
    return norm_ts(line[:tab]), rank, no, line[tab + 1:]


def numbered(path: Path, search: BlockSearch, *, start: int = 0, before: int = 0,
             limit: int | None = None, size: int = BLOCK_BYTES) -> tuple[list[LogLine], int]:
    """The kept lines of a rank's file from byte ``start`` (a line's first byte, ``before``
    lines ahead of it) to byte ``limit``, in one pass, numbered as ``RankLog.read`` numbers
    them (rank 0); and the number of the last line read. Where ``RunScan`` keeps the newest of
    many lines, this keeps every one: for searches that find few (``core.replay``)."""
    lines: list[LogLine] = []
    no = before  # lines before the block
    dense = False
    for _offset, data, lo, hi in blocks(path, size=size, limit=limit, start=start):
        block = search.kept(data, lo, hi, dense=dense)
        dense = block.dense(dense)
        buf: Any = block.buf
        nl: Any = b"\n" if isinstance(buf, bytes) else "\n"
        at = block.lo
        for begin, t, end in block.spans:
            no += buf.count(nl, at, begin)
            at = begin
            lines.append(_line(0, no + 1, buf[begin:end], t - begin))
        no += buf.count(nl, at, block.hi) + (0 if buf[block.hi - 1:block.hi] == nl else 1)
    return lines, no


PRINT_BYTES = 4096
"""The bytes before a place in a rank's file that say it is still the same file there."""


def end_print(path: Path, end: int) -> tuple[str, bool] | None:
    """The digest of the ``PRINT_BYTES`` before byte ``end`` of the file and whether the last
    of them is a newline; None when the file is shorter. What a search that stopped at ``end``
    checks before it goes on from there (``core.replay``, a live run's ``logs``)."""
    import hashlib

    try:
        with path.open("rb", buffering=0) as f:
            f.seek(max(0, end - PRINT_BYTES))
            data = f.read(min(end, PRINT_BYTES))
    except OSError:
        return None
    if len(data) != min(end, PRINT_BYTES):
        return None
    return hashlib.sha256(data).hexdigest(), data.endswith(b"\n")


def tail(path: Path, rank: int, window: int, *, size: int = BLOCK_BYTES) -> list[LogLine]:
    """The newest ``window`` lines of a rank's file with their numbers, as ``RankLog.read``
    reads them: every block is counted (at memory speed), only the last few are parsed."""
    recent: deque[tuple[int, bytes, int, int, int]] = deque()  # (lines before, data, lo, hi, lines)
    no = held = 0
    for _offset, data, lo, hi in blocks(path, size=size):
        n = data.count(b"\n", lo, hi) + (0 if data[hi - 1:hi] == b"\n" else 1)
        recent.append((no, data, lo, hi, n))
        no += n
        held += n
        while held - recent[0][4] >= window:
            held -= recent.popleft()[4]
    lines: list[LogLine] = []
    for before, data, lo, hi, _n in recent:
        text = data[lo:hi].decode("utf-8", "replace")
        rows = text.split("\n")
        if text.endswith("\n"):
            rows.pop()
        for i, row in enumerate(rows, before + 1):
            stamp, _, body = row.partition("\t")
            lines.append((norm_ts(stamp), rank, i, body))
    return lines[-window:] if window > 0 else []
