"""One line per node: available memory (bar and a sparkline of the last minutes), GPU load,
temperature and power, free disk where the recipe stages data. On a DGX Spark the GPU has no
memory of its own: memory is MemAvailable of the unified pool, and says so.

A sample builds and repaints its node's line, not the table (a line-API widget, like the log
view): at 32 nodes, 16 samples a second, the whole table built for every sample and rendered
again in nearly every frame was a tenth of a core (docs/benchmarks.md).
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.content import Content
from textual.geometry import Region, Size
from textual.reactive import var
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

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


class NodesPanel(Widget):
    """Rendered from the latest NodeTelemetry of each node; nothing here samples. Its height is
    its line count (a header and a line per node)."""

    DEFAULT_CSS = """
    NodesPanel { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.nodes: list[str] = []
        self.latest: dict[str, NodeTelemetry] = {}
        self.history: dict[str, deque[float]] = {}
        self._lines: list[Content] = [Content()]  # the header, then each node's line
        self._strips: dict[int, Strip] = {}  # rendered lines, by row, for ``_strips_for``
        self._strips_for: tuple[int, object] = (0, None)  # (width, style) they were rendered at
        self._subtitle_shown: Content | None = None

    def setup(self, nodes: list[str]) -> None:
        self.nodes = list(dict.fromkeys(nodes))
        self.latest.clear()
        self.history = {n: deque(maxlen=HISTORY) for n in self.nodes}
        self.refresh_table()

    sample: var[NodeTelemetry | None] = var(None, always_update=True, init=False)
    """A node's latest telemetry, as the screen hands it over."""

    def watch_sample(self, t: NodeTelemetry | None) -> None:
        if t is None or t.node not in self.history:
            return
        self.latest[t.node] = t
        if t.status == "ok" and t.sample is not None and t.sample.mem_total:
            self.history[t.node].append(t.sample.mem_available / t.sample.mem_total)
        row = self.nodes.index(t.node) + 1
        line = self._line(t.node, self._node_width())
        old = self._lines[row]
        if line.plain != old.plain or line.spans != old.spans:  # Content's == reads the text only
            self._lines[row] = line
            self._strips.pop(row, None)
            self.refresh(Region(0, row, self.size.width, 1))
        self._warned()

    @property
    def warnings(self) -> list[str]:
        return [f"{n}: {text}" for n, t in self.latest.items() for _code, text in t.warnings]

    def _node_width(self) -> int:
        return max((len(n) for n in self.nodes), default=4)

    def refresh_table(self) -> None:
        """Fixed-width columns, one line per node: it reads like the rank table above it."""
        w = self._node_width()
        header = Content(f"{'node':<{w}}  {'state':<11} {'memory free':<24} {'trend':<12} "
                         f"{'gpu':<14} disk free").stylize_before("dim")
        rows = len(self._lines)
        self._lines = [header, *(self._line(node, w) for node in self.nodes)]
        self._strips.clear()
        # Its height is its line count: the same lines with new numbers need no layout of the
        # whole screen (every node's sample, every 2 s, asked for one).
        self.refresh(layout=len(self._lines) != rows)
        self._warned()

    def _warned(self) -> None:
        self.set_class(bool(self.warnings), "-warning")
        self._subtitle()

    def _line(self, node: str, w: int) -> Content:
        """One node's line (its name ``w`` wide), from its latest sample; the panel's text is
        dim where a part says nothing else."""
        return Content.from_rich_text(self._text(node, w)).stylize_before("dim")

    def _text(self, node: str, w: int) -> Text:
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
        warnings = self.warnings
        if warnings:
            subtitle = content("⚠ " + warnings[0])
        else:
            subtitle = content(f"{self.allocation} · m hide" if self.allocation else "m hide")
        if subtitle != self._subtitle_shown:  # setting it repaints the whole panel
            self._subtitle_shown = subtitle
            self.border_subtitle = subtitle

    # -- rendering: a line at a time --------------------------------------------------------
    def render(self) -> Content:
        """The whole table (what an export or a test reads; the screen paints line by line)."""
        return Content("\n").join(self._lines)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((line.cell_length for line in self._lines), default=0)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        width, style = self.size.width, self.visual_style
        if self._strips_for != (width, style):
            self._strips_for = (width, style)
            self._strips.clear()
        strip = self._strips.get(y)
        if strip is None:
            if y >= len(self._lines):
                return Strip.blank(width, style.rich_style)
            strips = Visual.to_strips(self, self._lines[y], width, 1, style)
            strip = self._strips[y] = strips[0] if strips else Strip.blank(0)
        return strip
