"""Every rank's dump, rank by rank (``Orchestrator.dump``: the engine's stacks, its processes,
its last lines, all ranks at once), and the folder it was saved in. The ranks' words are
outside text: shown as plain text, control characters written out."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import LoadingIndicator, Static

from sparktui.backend.dumps import DumpResult
from sparktui.core.controls import visible
from sparktui.ui.outside import content
from sparktui.ui.screens.dialog import Dialog


class DumpScreen(Dialog[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,D", "dismiss", "close", id="dump-close"),
    ]

    def __init__(self, title: str, run: Callable[[], Awaitable[DumpResult]]) -> None:
        super().__init__()
        self.title_text = title
        self.run_dump = run
        self.result: DumpResult | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = content(self.title_text)
            dialog.border_subtitle = "esc close"
            yield Static("Dumping every rank at once…", id="dump-status")
            yield LoadingIndicator()
            with VerticalScroll(id="dump-scroll"):
                yield Static(id="dump-text")

    def on_mount(self) -> None:
        self.query_one("#dump-scroll").display = False
        self._run()

    @property
    def closed(self) -> bool:
        return self._dismissed or not self.is_attached or not self.children

    @work(exclusive=True)
    async def _run(self) -> None:
        status = self.query_one("#dump-status", Static)
        try:
            result = await self.run_dump()
        except Exception as exc:  # no run, a runtime that cannot look inside: its sentence
            if not self.closed:
                with contextlib.suppress(NoMatches):  # its widgets going with a dismissal
                    self.query_one(LoadingIndicator).display = False
                    status.update(Text(visible(f"dump failed: {exc}"), self.ink("error")))
            return
        if not self.closed:
            with contextlib.suppress(NoMatches):  # dismissed meanwhile, half removed
                self.show(result)

    def show(self, result: DumpResult) -> None:
        self.result = result
        self.query_one(LoadingIndicator).display = False
        self.query_one("#dump-status", Static).update(Text(visible(
            f"{len(result.ranks)} ranks in {result.seconds:.2f} s · saved in {result.folder}")))
        text = Text()
        for d in result.ranks:
            style = self.ink("accent") + Style(bold=True) if d.stacks else self.ink("warning")
            text.append(visible(f"rank {d.rank} on {d.node} · stacks by {d.how}\n"), style)
            body = d.text().split("\n", 1)[1]  # its file without the head line shown above (the
            # note, why the stacks came the way they did, is the body's first line)
            text.append(visible(body))
            text.append("\n")
        self.query_one("#dump-text", Static).update(text)
        scroll = self.query_one("#dump-scroll", VerticalScroll)
        scroll.display = True
        scroll.focus()
