"""One line per node: available memory (bar and a sparkline of the last minutes), GPU load,
temperature and power, free disk where the recipe stages data. On a DGX Spark the GPU has no
memory of its own: memory is MemAvailable of the unified pool, and says so.

A sample builds its node's line again, not the table: at 32 nodes (16 samples a second) the
whole table built and converted for every sample was 7 % of a core (docs/benchmarks.md).
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.content import Content
from textual.reactive import var
from textual.widgets import Static

from sparktui.backend.events import NodeTelemetry
from sparktui.core.controls import visible
from sparktui.core.units import format_bytes
from sparktui.ui.outside import content

HISTORY = 90  # samples: three minutes at the default 2 s
SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int) -> str:
    """Fractions 0..1 as block characters, the newest on the right."""
    tail = values[-width:]
    return "".join(SPARKS[min(len(SPARKS) - 1, max(0, int(v * len(SPARKS))))] for v in tail)


def gib(n: int) -> str:
    return f"{n / 2**30:.1f}"


class NodesPanel(Static):
    """Rendered from the latest NodeTelemetry of each node; nothing here samples."""

    DEFAULT_CSS = """
    NodesPanel { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.nodes: list[str] = []
        self.latest: dict[str, NodeTelemetry] = {}
        self.history: dict[str, deque[float]] = {}
        self._rows = -1  # lines of the text on screen
        self._lines: dict[str, Content] = {}  # each node's line as last built
        self._width = -1  # the node column's width the lines were built for

    def setup(self, nodes: list[str]) -> None:
        self.nodes = list(dict.fromkeys(nodes))
        self.latest.clear()
        self.history = {n: deque(maxlen=HISTORY) for n in self.nodes}
        self._lines.clear()
        self.refresh_table()

    sample: var[NodeTelemetry | None] = var(None, always_update=True, init=False)
    """A node's latest telemetry, as the screen hands it over."""

    def watch_sample(self, t: NodeTelemetry | None) -> None:
        if t is None or t.node not in self.history:
            return
        self.latest[t.node] = t
        if t.status == "ok" and t.sample is not None and t.sample.mem_total:
            self.history[t.node].append(t.sample.mem_available / t.sample.mem_total)
        self._lines.pop(t.node, None)
        self.refresh_table()

    @property
    def warnings(self) -> list[str]:
        return [f"{n}: {text}" for n, t in self.latest.items() for _code, text in t.warnings]

    def refresh_table(self) -> None:
        """Fixed-width columns, one line per node: it reads like the rank table above it."""
        w = max((len(n) for n in self.nodes), default=4)
        if w != self._width:
            self._lines.clear()
            self._width = w
        header = Content(f"{'node':<{w}}  {'state':<11} {'memory free':<24} {'trend':<12} "
                         f"{'gpu':<14} disk free")
        lines = [header]
        for node in self.nodes:
            line = self._lines.get(node)
            if line is None:
                line = self._lines[node] = Content.from_rich_text(self._line(node, w))
            lines.append(line)
        # Its height is its line count: the same lines with new numbers need no layout of the
        # whole screen (every node's sample, every 2 s, asked for one).
        rows = len(self.nodes) + 1
        self.update(Content("\n").join(lines).stylize_before("dim"), layout=rows != self._rows)
        self._rows = rows
        self.set_class(bool(self.warnings), "-warning")
        self._subtitle()

    def _line(self, node: str, w: int) -> Text:
        """One node's line (its name ``w`` wide), from its latest sample."""
        out = Text(f"{visible(node):<{w}}  ")
        t = self.latest.get(node)
        if t is None:
            out.append("…", style="dim")
            return out
        out.append(f"{t.status:<11} ",
                   style={"ok": "green", "stale": "yellow"}.get(t.status, "bold red"))
        s = t.sample
        if s is None:
            out.append(visible(t.detail), style="red")  # a node's words: shown, not obeyed
            return out
        dim = "dim" if t.status != "ok" else ""
        codes = {code for code, _text in t.warnings}
        low = "low-memory" in codes
        mem = f"{gib(s.mem_available)} / {gib(s.mem_total)} GiB"
        out.append(mem, style="bold red" if low else dim)
        pad = max(1, 24 - len(mem))
        out.append(" " + "unified".ljust(pad - 1) if s.unified else " " * pad, style="cyan")
        out.append(f"{sparkline(list(self.history.get(node, [])), 12):<12} ",
                   style="red" if low else "green")
        gpu = ", ".join(f"{g.util_pct or 0:.0f}% {g.temp_c or 0:.0f}°C {g.power_w or 0:.0f}W"
                        for g in s.gpus) or (s.gpu_note or "-")
        out.append(f"{visible(gpu):<14} ", style=dim)
        disk_low = any(code.startswith("low-disk:") for code in codes)
        out.append(" ".join(format_bytes(d.free) for d in s.disks[:1]) or "-",
                   style="bold red" if disk_low else dim)
        return out

    allocation: var[str] = var("", init=False)
    """The scheduler's allocation the ranks run in (Slurm: job, nodes, time left); "": none."""

    def watch_allocation(self) -> None:
        self._subtitle()

    def _subtitle(self) -> None:
        # a warning quotes the recipe (a staging dst: "low disk on /srv/[@click=...]"): text
        if self.warnings:
            self.border_subtitle = content("⚠ " + self.warnings[0])
        else:
            self.border_subtitle = content(f"{self.allocation} · m hide" if self.allocation
                                           else "m hide")
