"""The plan, per rank: container, command, env (secrets masked), mounts and the ``docker run``.
Every value is outside text: ``Text``, never markup (a cell holding ``[/]`` shows as it is), its
control characters written out as ``\\x1b`` (``core.controls``), as ``sparktui plan`` does: an
ESC in a recipe value would otherwise reach the terminal."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static, TabbedContent, TabPane

from sparktui.core.controls import visible
from sparktui.core.plan import Plan, RankPlan
from sparktui.ui.outside import content
from sparktui.ui.screens.dialog import Dialog


def _flag_lines(tokens: list[str]) -> list[str]:
    """``--flag value`` pairs on one line each."""
    lines: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("-") and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            lines.append(f"{token} {tokens[i + 1]}")
            i += 2
        else:
            lines.append(token)
            i += 1
    return lines


def _text(value: str) -> Text:
    return Text(visible(value))


def rank_view(plan: Plan, rank: RankPlan, recipe_args: int, muted: Style) -> RenderableType:
    c = rank.container
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style=muted, no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("rank", _text(f"{rank.rank} of {plan.world} · node {rank.node} ({rank.host}) · "
                              f"port {rank.port}"))
    grid.add_row("container", _text(c.name))
    grid.add_row("image", _text(c.image))
    grid.add_row("entrypoint", _text(" ".join(c.shown_entrypoint()) or "(image default)"))
    command = c.shown_command()
    own = _text("\n".join(_flag_lines(command[:recipe_args])))
    appended = _flag_lines(command[recipe_args:])
    if appended:
        own.append(("\n" if own else "") + "appended by the launcher:\n", muted + Style(italic=True))
        own.append(visible("\n".join(appended)))
    grid.add_row("command", own)
    env = c.shown_env()
    grid.add_row("env", _text("\n".join(f"{k}={v}" for k, v in env.items()) or "-"))
    grid.add_row("mounts", _text("\n".join(f"{m.source} → {m.target}{' (ro)' if m.read_only else ''}"
                                          for m in c.shown_mounts()) or "-"))
    grid.add_row("shm", _text(c.shm_size or "-"))
    d = c.docker
    grid.add_row("network", _text(f"{d.network_mode} · ipc {d.ipc_mode} · gpus {c.gpus}"))
    if c.devices:
        grid.add_row("devices", _text(" ".join(c.devices)))
    if d.cap_add:
        grid.add_row("cap_add", _text(" ".join(d.cap_add)))
    if d.ulimits:
        grid.add_row("ulimits", _text(" ".join(f"{k}={v}" for k, v in d.ulimits.items())))
    grid.add_row("labels", _text("\n".join(f"{k}={v}" for k, v in c.shown_labels().items())))
    run = Text(visible(rank.docker_run(show_secrets=False)), overflow="fold")
    return Group(grid, Text(""), Text("docker run", muted + Style(bold=True)), run)


class PlanScreen(Dialog[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,p", "dismiss", "close", id="plan-close"),
        *(Binding(str(n), f"show_tab({n - 1})", show=False, id=f"plan-rank-{n}") for n in range(1, 10)),
    ]

    def __init__(self, plan: Plan, recipe_args: int) -> None:
        super().__init__()
        self.plan = plan
        self.recipe_args = recipe_args

    def compose(self) -> ComposeResult:
        muted = self.ink("muted")
        with Vertical(id="dialog") as dialog:
            dialog.border_title = content(f"plan · {self.plan.recipe_slug} on {self.plan.cluster_name}")
            dialog.border_subtitle = content(f"plan {self.plan.plan_hash} · secrets masked · 1-9 rank · "
                                             "esc close")
            with TabbedContent():
                for rank in self.plan.ranks:
                    with TabPane(content(f"r{rank.rank} {rank.node}"), id=f"plan-r{rank.rank}"), \
                            VerticalScroll():
                        yield Static(rank_view(self.plan, rank, self.recipe_args, muted))
                if self.plan.runner:  # how the cluster's kind runs it (Slurm: job and steps)
                    with TabPane("runner", id="plan-runner"), VerticalScroll():
                        for title, text in self.plan.runner:
                            yield Static(Group(Text(title, muted + Style(bold=True)),
                                               _text(text), Text("")))

    def action_show_tab(self, index: int) -> None:
        if 0 <= index < self.plan.world:
            self.query_one(TabbedContent).active = f"plan-r{index}"
