"""Staging, one progress bar per node: bytes, rate, ETA and phase, as each node's agent reports."""

from __future__ import annotations

from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import Label, ProgressBar

from sparktui.backend.events import StagingProgress
from sparktui.core.units import format_bytes
from sparktui.ui.formatting import eta, rate
from sparktui.ui.outside import content
from sparktui.ui.widgets.one_line import OneLine


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


class StagingPanel(Vertical):
    DEFAULT_CSS = """
    StagingPanel {
        height: auto;
        max-height: 10;
        padding: 0 1;
        & > Horizontal { height: 1; }
        & .node { width: 12; }
        & .phase { width: 8; color: $text-muted; }
        & ProgressBar { width: 32; }
        & .info { width: 1fr; }
        & .-failed .info { color: $error; }
        & .-done .phase { color: $success; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.nodes: list[str] = []
        self.last: dict[str, StagingProgress] = {}

    async def setup(self, nodes: list[str]) -> None:
        """One row per node. The old rows are gone before the new ones mount: two recipes on
        the same cluster (or the same recipe opened again) name their rows alike."""
        self.nodes = list(dict.fromkeys(nodes))
        self.last.clear()
        await self.remove_children()
        await self.mount_all(self._row(node) for node in self.nodes)

    def _row(self, node: str) -> Horizontal:
        """Before the node's agent reports, nothing runs: no phase, no bar (an indeterminate
        bar pulsed beside "waiting" as if staging were under way), and the key that starts it."""
        bar = ProgressBar(total=None, show_eta=False, show_percentage=True)
        bar.display = False
        return Horizontal(
            Label(content(node), classes="node", markup=False),
            Label("-", classes="phase", markup=False),
            bar,
            OneLine("s stages and verifies", classes="info"),
            id=f"stage-{_safe(node)}",
        )

    progress: var[StagingProgress | None] = var(None, always_update=True, init=False)
    """A node's latest staging report, as the screen hands it over."""

    def watch_progress(self, p: StagingProgress | None) -> None:
        if p is None:
            return
        self.last[p.node] = p
        try:
            row = self.query_one(f"#stage-{_safe(p.node)}", Horizontal)
        except Exception:
            return
        row.set_class(p.phase == "failed", "-failed")
        row.set_class(p.phase == "done", "-done")
        row.query_one(".phase", Label).update(content(p.phase))  # the node's agent's word
        progress = row.query_one(ProgressBar)
        # a bar that pulses (no total yet) says work goes on: not beside a failure or an end
        progress.display = bool(p.bytes_total) or p.phase not in ("failed", "done")
        if p.bytes_total:
            progress.update(total=p.bytes_total, progress=p.bytes_done)
        info = row.query_one(".info", OneLine)
        if p.phase == "failed":  # the row names the node already; the sentence's end must show
            info.text = (p.error or "failed").removeprefix(f"{p.node}: ")
        elif p.phase == "done":
            info.text = f"{format_bytes(p.bytes_total)} in place"
        else:
            done = f"{format_bytes(p.bytes_done)} / {format_bytes(p.bytes_total)}" if p.bytes_total else ""
            file = f"  {p.file}" if p.file else ""
            info.text = f"{done}  {rate(p.rate)}  ETA {eta(p.eta)}{file}".strip()

    def fraction(self, node: str) -> tuple[float, str] | None:
        p = self.last.get(node)
        if p is None:
            return None
        if p.phase == "done":
            return 1.0, p.phase
        return (p.bytes_done / p.bytes_total if p.bytes_total else 0.0), p.phase
