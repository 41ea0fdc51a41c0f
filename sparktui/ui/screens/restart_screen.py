"""Restart one rank: says what happens to the rest of its TP group, and offers the choice."""

from __future__ import annotations

from typing import ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from sparktui.ui.screens.dialog import Dialog

RestartChoice = Literal["rank", "group"]


def explain(rank: int, node: str, world: int, tp: int) -> str:
    first = (f"Restart rank {rank} on {node}: its container is stopped, removed and started "
             "again from the same plan. Its log goes on in the same run, after a marker line.")
    if world <= 1:
        return first
    if tp > 1:
        return (f"{first}\n\nRank {rank} is one of the {world} ranks of a TP{tp} group. When one rank "
                "goes away, the other ranks of the group usually fail too (NCCL or TCPStore errors) "
                "and the restarted rank then waits for peers that are gone.\n\n"
                "Whole group: every rank is stopped and launched again (workers first), in the same run.")
    return (f"{first}\n\nThe other {world - 1} rank(s) keep running.\n\n"
            "Whole group: every rank is stopped and launched again (workers first), in the same run.")


class RestartScreen(Dialog[RestartChoice | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "choose('rank')", "rank only", id="restart-rank-only"),
        Binding("g", "choose('group')", "whole group", id="restart-whole-group"),
        Binding("escape,n", "choose('')", "cancel", id="restart-cancel"),
    ]

    def __init__(self, rank: int, node: str, world: int, tp: int) -> None:
        super().__init__()
        self.rank, self.node, self.world, self.tp = rank, node, world, tp

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = f"restart rank {self.rank}?"
            yield Static(explain(self.rank, self.node, self.world, self.tp), id="explain", markup=False)
            with Horizontal(id="buttons"):
                yield Button(f"Rank {self.rank} only (r)", id="rank", variant="warning")
                if self.world > 1:
                    yield Button("Whole group (g)", id="group", variant="error")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#rank", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_choose(event.button.id or "")

    def action_choose(self, choice: str) -> None:
        """``choice`` is a binding's argument or a button's id; anything but a choice cancels."""
        result: RestartChoice | None
        if choice == "rank":
            result = "rank"
        elif choice == "group":
            if self.world <= 1:
                return
            result = "group"
        else:
            result = None
        self.dismiss(result)
