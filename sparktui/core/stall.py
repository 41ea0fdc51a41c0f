"""Which rank went quiet during a boot: a rank silent for ``[boot] stall`` seconds while the
others printed, or every rank silent that long.

A boot that hangs ("freezes at NCCL init", "rank 1 never joins") shows nothing wrong in any one
log: the clue is that the ranks progressed together and one stopped. The sentence names that
rank, the line it stopped after and how long ago, and where the others went on to, so the
operator opens the right log first. A stall is a warning: the boot goes on until its timeout.
Pure: the Board's boot watch asks it on every tick.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sparktui.core.procs import stack_line
from sparktui.core.units import format_duration

LINE_CHARS = 100
"""A quoted line is cut here: the sentence is a toast and one line of ``up``'s output."""


@dataclass(frozen=True)
class Quiet:
    """One booting rank's last line: when it came (epoch seconds; the boot's start when it
    printed nothing yet) and its text (None: none yet)."""

    rank: int
    at: float
    line: str | None


@dataclass(frozen=True)
class Stall:
    """The rank that stalled first, and what the others did since."""

    rank: int
    silent_s: float
    after: str | None  # its last line; None: it printed nothing this boot
    others: tuple[tuple[tuple[int, ...], str | None], ...]  # (ranks, their last line), newest first
    every: bool  # every rank is silent (no rank went on)
    ranks: tuple[int, ...]  # every rank silent for ``stall`` seconds, the first first

    @property
    def sentence(self) -> str:
        silent = format_duration(self.silent_s)
        after = f"after `{quote(self.after)}`" if self.after is not None else "without a line"
        if self.every:
            return f"every rank silent; rank {self.rank} went quiet first, {silent} ago, {after}"
        head = f"rank {self.rank} silent for {silent} {after}"
        others = []
        for i, (ranks, line) in enumerate(self.others):
            who = ranks_word(ranks)
            went = "went on to" if i == 0 else "to"
            others.append(f"{who} {went} `{quote(line)}`" if line is not None else f"{who} printed")
        return head + ("; " + "; ".join(others) if others else "")

    def to_json(self) -> dict[str, object]:
        return {"rank": self.rank, "silent_s": round(self.silent_s, 1), "after": self.after,
                "every": self.every, "ranks": list(self.ranks),
                "others": [{"ranks": list(r), "line": line} for r, line in self.others],
                "sentence": self.sentence}


def progress(text: str, request_line: Callable[[str], bool]) -> bool:
    """Whether a line shows the rank getting on with its boot: not one about a request served
    (sparktui's own probes write one a second) nor a stack dump's (a dump's signal makes every
    rank print one)."""
    return not request_line(text) and not stack_line(text)


def last_progress(lines: Sequence[tuple[int, str, str]],
                  request_line: Callable[[str], bool]) -> tuple[str, str] | None:
    """``(ts, text)`` of the last ``progress`` line of a batch ``(line_no, ts, text)``."""
    for _, ts, text in reversed(lines):
        if progress(text, request_line):
            return ts, text
    return None


def quote(line: str | None) -> str:
    text = (line or "").strip()
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 3] + "..."


def ranks_word(ranks: Sequence[int]) -> str:
    return (f"rank {ranks[0]}" if len(ranks) == 1
            else "ranks " + ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}")


def find_stall(quiet: Sequence[Quiet], now: float, stall_s: float) -> Stall | None:
    """The stall among these booting ranks at ``now``, or None: ranks silent ``stall_s`` or
    longer while another printed more recently than that, or every rank silent that long. The
    first to stall is the one silent longest (its rank breaks a tie)."""
    if not quiet or stall_s <= 0:
        return None
    silent = sorted((q for q in quiet if now - q.at >= stall_s), key=lambda q: (q.at, q.rank))
    if not silent:
        return None
    first = silent[0]
    going = sorted((q for q in quiet if now - q.at < stall_s), key=lambda q: (-q.at, q.rank))
    if going or len(quiet) == 1:
        groups: dict[str | None, list[int]] = {}
        for q in going:
            groups.setdefault(q.line, []).append(q.rank)
        others = tuple((tuple(sorted(ranks)), line) for line, ranks in groups.items())
        return Stall(first.rank, now - first.at, first.line, others, False,
                     tuple(q.rank for q in silent))
    return Stall(first.rank, now - first.at, first.line, (), True, tuple(q.rank for q in silent))
