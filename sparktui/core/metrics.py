"""The engines' own numbers (their Prometheus ``/metrics``), parsed and read over time.

Both engines serve the Prometheus text format through ``prometheus_client``; its parser reads
it here, so sparktui reads what Prometheus would. A :class:`Scrape` is one answer, reduced to
the families an adapter's :class:`MetricsSpec` names; a :class:`Pulse` turns the scrapes of one
rank into the values the console shows: gauges as they are, counters as a rate per second,
histograms as quantiles over a window, each with Prometheus's own rules for counter resets and
bucket interpolation (a restarted rank starts its counters at 0 again). Pure: the backend
fetches the text and hands it in with its clock.
"""

from __future__ import annotations

import io
import itertools
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

PulseKey = Literal["throughput", "running", "queued", "kv_use", "ttft_p50", "ttft_p95",
                   "accept", "cache_hit", "prompt_rate", "preemptions"]
PULSE_KEYS: tuple[PulseKey, ...] = ("throughput", "running", "queued", "kv_use", "ttft_p50",
                                    "ttft_p95", "accept", "cache_hit", "prompt_rate", "preemptions")
"""Every key, in the order the console shows them."""

Read = Literal["gauge", "rate", "p50", "p95"]
Level = Literal["ok", "warn", "bad", "none"]

_QUANTILES: dict[Read, float] = {"p50": 0.5, "p95": 0.95}

# Labels that name one replica of a tensor-parallel group (SGLang's schedulers label their
# gauges with their TP and expert-parallel rank): each replica reports the same batch, so those
# label sets are one set of numbers, counted once (the max), not summed.
_REPLICA_LABELS = frozenset({"tp_rank", "moe_ep_rank"})

_SHOWN_TEXT = 80  # characters of an unreadable line quoted in the sentence


@dataclass(frozen=True)
class MetricSeries:
    """One value the console shows and the family of the engine it is read from."""

    key: PulseKey
    family: str  # family name as the parser gives it (a counter without "_total")
    read: Read  # rate: a counter per second; p50/p95: a histogram's quantile
    scale: float = 1.0  # e.g. a 0..1 ratio shown as a % (100.0)
    combine: Literal["sum", "max"] = "sum"  # over label sets: counts add up, a share (KV use
    # of two data-parallel engines) is the fullest one's, never 160 %


@dataclass(frozen=True)
class MetricsSpec:
    """Where an engine serves its metrics and which of them sparktui reads."""

    path: str = "/metrics"
    series: tuple[MetricSeries, ...] = ()
    flag: str | None = None  # the engine flag without which it serves no /metrics


def load_series(*, throughput: MetricSeries, running: str, queued: str, kv_use: str,
                ttft: str) -> tuple[MetricSeries, ...]:
    """The series every engine's pulse shows first, from its families' names: the same keys,
    reads and combining for each engine, so the pulse and ``top`` never miss one."""
    return (
        throughput,
        MetricSeries("running", running, "gauge"),
        MetricSeries("queued", queued, "gauge"),
        MetricSeries("kv_use", kv_use, "gauge", scale=100.0, combine="max"),
        MetricSeries("ttft_p50", ttft, "p50"),
        MetricSeries("ttft_p95", ttft, "p95"),
    )


@dataclass(frozen=True)
class Scrape:
    """One good answer of a rank's metrics page, reduced to the spec's families."""

    at: float  # seconds (time.monotonic() of the backend)
    values: dict[str, float]  # gauge and counter families: summed over label sets
    buckets: dict[str, tuple[tuple[float, float], ...]]  # histogram family -> cumulative
    # (le, count) summed over label sets, sorted, +Inf last


class MetricsUnreadable(ValueError):
    """A metrics page that is not Prometheus text; its ``str()`` is a sentence for the operator."""


class _Lines(io.StringIO):
    """The text, counting the lines the parser has read: its errors name no line, ours do
    (``numbers``: each line's number in the page it was taken from)."""

    def __init__(self, text: str, numbers: list[int] | None = None) -> None:
        super().__init__(text)
        self.numbers = numbers
        self.taken = 0
        self.last = ""

    def __next__(self) -> str:  # type: ignore[override]  # typeshed's _IOBase says bytes
        text = super().__next__()
        self.taken += 1
        self.last = text
        return text

    @property
    def line(self) -> int:
        if self.numbers and 0 < self.taken <= len(self.numbers):
            return self.numbers[self.taken - 1]
        return self.taken


def _wanted(text: str, names: Iterable[str]) -> tuple[str, list[int]] | None:
    """The page's lines of the named samples (and their HELP and TYPE), with their numbers;
    None when it has no sample of them. The parser is pure Python (about 0.6 ms a KB): a
    vLLM page is mostly families sparktui does not read, so only these are handed to it."""
    names = tuple(names)
    starts = (tuple(n + c for n in names for c in ("{", " ", "\t"))
              + tuple(f"# {k} {n} " for n in names for k in ("HELP", "TYPE")))
    kept: list[str] = []
    numbers: list[int] = []
    samples = False
    for no, line in enumerate(text.split("\n"), 1):
        if line.startswith(starts):
            kept.append(line)
            numbers.append(no)
            samples = samples or not line.startswith("#")
    return ("\n".join(kept) + "\n", numbers) if samples else None


def _quote(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= _SHOWN_TEXT else text[:_SHOWN_TEXT] + "...")


def _le(raw: str | None, family: str) -> float:
    """A bucket's upper bound; a bucket without one cannot be placed."""
    try:
        le = float(raw) if raw is not None else math.nan
    except ValueError:
        le = math.nan
    if math.isnan(le):
        what = "no le label" if raw is None else f"no number in its le label ({_quote(raw)})"
        raise MetricsUnreadable(f"A bucket of the histogram {family} on the metrics page has "
                                f"{what}.")
    return le


def _samples(text: str, names: Iterable[str]) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of the named ones in the text as (name, labels, value), or
    MetricsUnreadable. The parser is lax and documents no exceptions: whatever it raises on
    this outside text means the text is not Prometheus text, and the caller gets one exception
    with the line it stopped at. A page without any of them is parsed whole, so one that is not
    Prometheus text at all (a proxy's error page) says so; in a page with some, the lines of
    families sparktui does not read are not looked at."""
    # imported here: the client package takes 0.19 s to import, and every verb that reads an
    # engine adapter (validate, plan, status) imports this module
    from prometheus_client.parser import text_fd_to_metric_families

    wanted = _wanted(text, names)
    lines = _Lines(text) if wanted is None else _Lines(*wanted)
    try:
        return [(s.name, s.labels, float(s.value))
                for family in text_fd_to_metric_families(lines) for s in family.samples]
    except Exception as error:  # any: see the docstring
        raise MetricsUnreadable(f"The metrics page is not Prometheus text: the parser stopped "
                                f"at line {lines.line}, {_quote(lines.last)}.") from error


def _combine(by_labels: Iterable[tuple[dict[str, str], float]], how: str = "sum") -> float:
    """The sum (or max) over label sets, replicas of one TP group counted once (their max)."""
    groups: dict[frozenset[tuple[str, str]], float] = {}
    for labels, value in by_labels:
        group = frozenset((k, v) for k, v in labels.items() if k not in _REPLICA_LABELS)
        groups[group] = max(groups.get(group, value), value)
    return max(groups.values()) if how == "max" else sum(groups.values())


def parse_exposition(text: str, at: float, spec: MetricsSpec) -> Scrape:
    """The families the spec names, from one metrics page read at ``at``. NaN samples are not
    known and skipped (a gauge an engine has not set yet), and so are infinite ones (no number
    to show or subtract); anything that is not Prometheus text raises MetricsUnreadable with a
    sentence, never another exception."""
    plain = {s.family + ("_total" if s.read == "rate" else ""): s.family
             for s in spec.series if s.read in ("gauge", "rate")}
    histograms = {s.family + "_bucket": s.family for s in spec.series if s.read in _QUANTILES}
    values: dict[str, list[tuple[dict[str, str], float]]] = {}
    buckets: dict[str, dict[float, list[tuple[dict[str, str], float]]]] = {}
    names = [*plain, *histograms, *(f"{family}_{end}" for family in histograms.values()
                                    for end in ("sum", "count")),
             *{s.family for s in spec.series}]
    for name, labels, value in _samples(text, names):
        if not math.isfinite(value):
            continue
        if name in plain:
            values.setdefault(plain[name], []).append((labels, value))
        elif name in histograms:
            family = histograms[name]
            rest = {k: v for k, v in labels.items() if k != "le"}
            le = _le(labels.get("le"), family)
            buckets.setdefault(family, {}).setdefault(le, []).append((rest, value))
    how = {s.family: s.combine for s in spec.series}
    sums = {family: _combine(samples, how.get(family, "sum")) for family, samples in values.items()}
    return Scrape(
        at=at,
        values={family: value for family, value in sums.items() if math.isfinite(value)},
        buckets={family: tuple(sorted((le, _combine(samples)) for le, samples in by_le.items()))
                 for family, by_le in buckets.items()})


def _increase(old: float, new: float) -> float:
    """A counter's increase; one that went down restarted from 0 (Prometheus's rate)."""
    return new - old if new >= old else new


Buckets = tuple[tuple[float, float], ...]


def _restarted(old: Buckets, new: Buckets) -> bool:
    """A count that went down, or another set of buckets: the engine started again from 0."""
    return [le for le, _ in old] != [le for le, _ in new] or any(
        n < o for (_, o), (_, n) in zip(old, new, strict=True))


def quantile(q: float, buckets: Buckets) -> float | None:
    """The q-quantile of cumulative (le, count) buckets as Prometheus's histogram_quantile
    computes it: linear inside the bucket the rank falls in, the first bucket starting at 0,
    the highest finite bound when it falls in +Inf. None without observations or without a
    +Inf bucket (the total is not known)."""
    if len(buckets) < 2 or buckets[-1][0] != math.inf:
        return None
    counts: list[float] = []
    for _, count in buckets:  # non-decreasing, as Prometheus forces it (float sums may wobble)
        counts.append(max(count, counts[-1]) if counts else count)
    total = counts[-1]
    if not 0 < total < math.inf:  # none, or sums past what a float holds
        return None
    rank = q * total
    b = next((i for i, count in enumerate(counts) if count >= rank), None)
    if b is None:  # a NaN among the counts (infinite sums subtracted)
        return None
    if b == len(buckets) - 1:
        return buckets[-2][0]
    end = buckets[b][0]
    if b == 0 and end <= 0:
        return end
    start = buckets[b - 1][0] if b > 0 else 0.0
    below = counts[b - 1] if b > 0 else 0.0
    inside = counts[b] - below
    return end if inside <= 0 else start + (end - start) * (rank - below) / inside


class Pulse:
    """One rank's (or the group's) readings over time: the values now, their history for the
    sparklines, and whether the last scrape failed (its values are then the last good ones)."""

    def __init__(self, spec: MetricsSpec, window_s: float = 60.0, keep: int = 120) -> None:
        self.spec = spec
        self.window_s = window_s
        self.stale: str | None = None  # why the last scrape failed (None: the last one was good)
        self.last_ok: float | None = None  # .at of the last good scrape
        self.failed_at: float | None = None  # when the last scrape failed
        self._scrapes: deque[Scrape] = deque()
        self._values: dict[PulseKey, float | None] = {s.key: None for s in spec.series}
        self._history: dict[PulseKey, deque[float]] = {s.key: deque(maxlen=keep)
                                                        for s in spec.series}

    def add(self, scrape: Scrape) -> None:
        """A good scrape: the values are read again and stale is cleared."""
        self._scrapes.append(scrape)
        # keep the window and the one scrape before it (the base when the interval is longer)
        while len(self._scrapes) > 2 and self._scrapes[1].at < scrape.at - self.window_s:
            self._scrapes.popleft()
        self.stale, self.failed_at, self.last_ok = None, None, scrape.at
        for series in self.spec.series:
            value = self._read(series)
            self._values[series.key] = value
            if value is not None:
                self._history[series.key].append(value)

    def fail(self, why: str, at: float) -> None:
        """A failed or unreadable scrape: stale with why; the last values stay shown."""
        self.stale, self.failed_at = why, at

    def values(self) -> dict[PulseKey, float | None]:
        """The current value of every key of the spec (None: not known)."""
        return dict(self._values)

    def history(self, key: PulseKey) -> list[float]:
        """The known values of ``key``, oldest first, one per good scrape, for a sparkline."""
        return list(self._history.get(key, ()))

    def _read(self, series: MetricSeries) -> float | None:
        value: float | None
        if series.read == "gauge":
            value = self._scrapes[-1].values.get(series.family)
        elif series.read == "rate":
            value = self._rate(series.family)
        else:
            value = self._quantile(series.family, _QUANTILES[series.read])
        return None if value is None else value * series.scale

    def _rate(self, family: str) -> float | None:
        """Per second between the last two good scrapes."""
        if len(self._scrapes) < 2:
            return None
        old, new = self._scrapes[-2], self._scrapes[-1]
        if family not in old.values or family not in new.values or new.at <= old.at:
            return None
        return _increase(old.values[family], new.values[family]) / (new.at - old.at)

    def _quantile(self, family: str, q: float) -> float | None:
        """Over the observations of the window: the bucket increases from the oldest scrape
        within it (or the one before the newest, if none is) to the newest. After a restart,
        the observations since it (the newest reading's): the engine that answers now is the
        one the operator watches, not the one that went away."""
        newest = self._scrapes[-1]
        if family not in newest.buckets:
            return None
        since = newest.at - self.window_s
        readings = [s.buckets.get(family) for s in self._scrapes if s.at >= since]
        if len(readings) < 2 and len(self._scrapes) >= 2:
            readings = [self._scrapes[-2].buckets.get(family), newest.buckets.get(family)]
        had = [r for r in readings if r is not None]
        seen: Buckets | None = None
        for old, new in itertools.pairwise(had):
            if _restarted(old, new):
                seen = new  # a restart: the observations since it, all of the newer reading
            else:
                base = seen if seen is not None else tuple((le, 0.0) for le, _ in old)
                seen = tuple((le, s + n - o) for (le, s), (_, o), (_, n)
                             in zip(base, old, new, strict=True))
        return None if seen is None else quantile(q, seen)


_SUMMED: frozenset[PulseKey] = frozenset({"throughput", "running", "queued", "prompt_rate",
                                          "preemptions"})


def group_values(pulses: Sequence[Pulse]) -> dict[PulseKey, float | None]:
    """The group's values: what adds up across ranks (tokens, requests, preemptions) summed;
    levels and latencies (KV use, TTFT, acceptance, cache hits) the worst rank's, the max over
    the ranks that have one. None where no rank has a value."""
    known: dict[PulseKey, list[float]] = {}
    keys: set[PulseKey] = set()
    for pulse in pulses:
        for key, value in pulse.values().items():
            keys.add(key)
            if value is not None:
                known.setdefault(key, []).append(value)
    out: dict[PulseKey, float | None] = {}
    for key in PULSE_KEYS:
        if key in keys:
            values = known.get(key)
            out[key] = None if not values else sum(values) if key in _SUMMED else max(values)
    return out


THRESHOLDS: dict[PulseKey, tuple[float, float]] = {
    "kv_use": (85.0, 95.0),  # %: near full, the engine preempts or queues
    "queued": (1.0, 8.0),  # requests waiting for a slot
    "ttft_p50": (1.0, 3.0),  # seconds
    "ttft_p95": (2.0, 5.0),  # seconds
    "preemptions": (0.01, 1.0),  # per second: KV cache too small for the load
}
"""(warn, bad) per key, for colouring; a key absent is never coloured."""


def level(key: PulseKey, value: float | None) -> Level:
    """The colour of a value: "none" when it is not known or its key has no thresholds."""
    if value is None or key not in THRESHOLDS:
        return "none"
    warn, bad = THRESHOLDS[key]
    return "bad" if value >= bad else "warn" if value >= warn else "ok"


def _count(value: float) -> str:
    """A rate or count in three characters or so: 0.4, 12, 850, 1.2k, 12k, 3.4M."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            scaled = value / limit
            return f"{scaled:.1f}{suffix}" if abs(scaled) < 10 else f"{scaled:.0f}{suffix}"
    return f"{value:.1f}" if abs(value) < 10 and value != int(value) else f"{value:.0f}"


def shown(key: PulseKey, value: float | None) -> str:
    """A value as the console writes it: "1.2k tok/s", "3", "87 %", "0.42 s", "-"."""
    if value is None or math.isnan(value):
        return "-"
    if key in ("throughput", "prompt_rate"):
        return f"{_count(value)} tok/s"
    if key in ("running", "queued"):
        return f"{value:.0f}"
    if key in ("kv_use", "cache_hit"):
        return f"{value:.0f} %"
    if key in ("ttft_p50", "ttft_p95"):
        return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"
    if key == "preemptions":
        return f"{value:.2f}/s"
    return f"{value:.2f}"  # accept: tokens accepted per speculative step


LABELS: dict[PulseKey, str] = {
    "throughput": "gen",
    "running": "running",
    "queued": "queued",
    "kv_use": "KV use",
    "ttft_p50": "TTFT p50",
    "ttft_p95": "TTFT p95",
    "accept": "accept len",
    "cache_hit": "cache hit",
    "prompt_rate": "prompt",
    "preemptions": "preempt",
}
"""The console's name of each key; the unit is the value's ("gen 1.2k tok/s")."""
