"""The plan, per rank: container, command, env (secrets masked), mounts and the ``docker run``.
Every value is outside text: ``Text``, never markup (a cell holding ``[/]`` shows as it is)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static, TabbedContent, TabPane

from sparktui.core.plan import Plan, RankPlan
from sparktui.ui.colors import theme_colors
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


def rank_view(plan: Plan, rank: RankPlan, recipe_args: int, muted: str) -> RenderableType:
    c = rank.container
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style=muted, no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("rank", Text(f"{rank.rank} of {plan.world} · node {rank.node} ({rank.host}) · "
                              f"port {rank.port}"))
    grid.add_row("container", Text(c.name))
    grid.add_row("image", Text(c.image))
    grid.add_row("entrypoint", Text(" ".join(c.shown_entrypoint()) or "(image default)"))
    command = c.shown_command()
    own = Text("\n".join(_flag_lines(command[:recipe_args])))
    appended = _flag_lines(command[recipe_args:])
    if appended:
        own.append(("\n" if own else "") + "appended by the launcher:\n", f"italic {muted}".strip())
        own.append("\n".join(appended))
    grid.add_row("command", own)
    env = c.shown_env()
    grid.add_row("env", Text("\n".join(f"{k}={v}" for k, v in env.items()) or "-"))
    grid.add_row("mounts", Text("\n".join(f"{m.source} → {m.target}{' (ro)' if m.read_only else ''}"
                                          for m in c.mounts) or "-"))
    grid.add_row("shm", Text(c.shm_size or "-"))
    grid.add_row("network", Text(f"{c.network_mode} · ipc {c.ipc_mode} · gpus {c.gpus}"))
    if c.devices:
        grid.add_row("devices", Text(" ".join(c.devices)))
    if c.cap_add:
        grid.add_row("cap_add", Text(" ".join(c.cap_add)))
    if c.ulimits:
        grid.add_row("ulimits", Text(" ".join(f"{k}={v}" for k, v in c.ulimits.items())))
    grid.add_row("labels", Text("\n".join(f"{k}={v}" for k, v in c.labels.items())))
    run = Text(rank.docker_run(show_secrets=False), overflow="fold")
    return Group(grid, Text(""), Text("docker run", f"bold {muted}".strip()), run)


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
        muted = theme_colors(self.app.theme_variables).get("text-muted", "")
        with Vertical(id="dialog") as dialog:
            dialog.border_title = f"plan · {self.plan.recipe_slug} on {self.plan.cluster_name}"
            dialog.border_subtitle = f"plan {self.plan.plan_hash} · secrets masked · 1-9 rank · esc close"
            with TabbedContent():
                for rank in self.plan.ranks:
                    with TabPane(f"r{rank.rank} {rank.node}", id=f"plan-r{rank.rank}"), VerticalScroll():
                        yield Static(rank_view(self.plan, rank, self.recipe_args, muted))

    def action_show_tab(self, index: int) -> None:
        if 0 <= index < self.plan.world:
            self.query_one(TabbedContent).active = f"plan-r{index}"
