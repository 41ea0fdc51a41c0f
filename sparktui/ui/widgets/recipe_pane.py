"""The highlighted recipe: summary, lint results and its TOML source, highlighted, with secret
values masked as the plan masks them and control characters written out as ``\\x1b``
(``core.controls``: a recipe's ESC never reaches the terminal)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import var
from textual.widgets import Static

from sparktui.catalog import RecipeInfo
from sparktui.core.controls import visible
from sparktui.core.recipe import CheckSpec
from sparktui.ui.formatting import ink, muted_css, palette
from sparktui.ui.outside import content


class RecipePane(VerticalScroll):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "recipe-pane--error", "recipe-pane--warning", "recipe-pane--success", "recipe-pane--muted"}
    DEFAULT_CSS = muted_css("""
    RecipePane {
        height: 1fr;
        background: $surface;
        padding: 0 1;
        & > Static { width: 1fr; }
        & > #recipe-source { margin-top: 1; }
        & > .recipe-pane--error { color: $error; }
        & > .recipe-pane--warning { color: $warning; }
        & > .recipe-pane--success { color: $success; }
        & > .recipe-pane--muted { color: $muted; }
    }
    """)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._palette: tuple[Style, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static(id="recipe-summary")
        yield Static(id="recipe-lint")
        yield Static(id="recipe-source")

    info: var[RecipeInfo | None] = var(None, always_update=True, init=False)
    """The recipe shown: the highlighted one (None: no recipe)."""

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:  # the component styles are updated after this call (rank_table)
            self.call_later(self._restyle)

    def _restyle(self) -> None:
        if palette(self) != self._palette:
            self.watch_info(self.info)  # another theme: the text's colours

    def watch_info(self, info: RecipeInfo | None) -> None:
        self._palette = palette(self)
        self.border_title = content(info.slug if info is not None else "recipe")
        self.query_one("#recipe-summary", Static).update(self._summary(info))
        self.query_one("#recipe-lint", Static).update(self._lint(info))
        self.query_one("#recipe-source", Static).update(self._source(info))

    def _ink(self, name: str) -> Style:
        return ink(self, f"recipe-pane--{name}")

    def _summary(self, info: RecipeInfo | None) -> RenderableType:
        if info is None:
            return Text("No recipe selected.")
        warning = self._ink("warning")
        hides = Text(f"{visible(info.hides_text(paths=False))}\n", warning) if info.hides else Text()
        if info.recipe is None:
            return Text.assemble((visible(info.slug), "bold"),
                                 "\ncannot be loaded: fix the problems below\n", hides)
        spec = info.recipe.spec
        muted = self._ink("muted")
        out = Text()
        out.append(f"{visible(info.recipe.title)}\n", "bold")
        out.append_text(hides)
        out.append(f"{spec.engine} · TP{spec.tensor_parallel_size} · {spec.required_nodes} nodes\n")

        def row(key: str, value: str) -> None:  # values from the recipe: controls made visible
            out.append(f"{key:<8}", muted)
            out.append(f"{visible(value)}\n")

        row("image", spec.docker_image)
        row("model", spec.model)
        per_rank = info.cluster is not None and info.cluster.traits.on_this_machine
        row("port", str(spec.api_port) + (" + rank" if per_rank else ""))
        if info.cluster is not None:
            row("cluster", f"{info.cluster.name} ({len(info.cluster.nodes)} nodes)")
        row("args", f"{len(spec.args)} (env {len(spec.env)}, mounts {len(spec.extra_mounts)})")
        if spec.staging:
            for job in spec.staging:
                row("staging", f"{job.id} ({job.kind}) min free {job.min_free}")
        else:
            row("staging", "none")
        boot = spec.boot
        scoped = sum(1 for c in boot.must_show if isinstance(c, CheckSpec) and c.ranks != "any")
        row("checks", f"{len(boot.must_show)} must show, {len(boot.must_not_show)} never")
        if scoped:
            row("", f"{scoped} on given ranks")
        if boot.engine_fatal:
            row("", "+ engine fatal lines")
        row("timeout", str(boot.timeout))
        return out

    def _lint(self, info: RecipeInfo | None) -> RenderableType:
        if info is None:
            return Text("")
        if not info.problems:
            return Text.assemble(("lint ", "bold"), ("✓ no problems", self._ink("success")))
        out = Text()
        out.append(f"lint: {len(info.errors)} error(s), {len(info.warnings)} warning(s)\n", "bold")
        for p in info.problems:
            style = self._ink("error" if p.severity == "error" else "warning")
            where = f"{p.line}:{p.column or 1} " if p.line is not None else ""
            key = f"{p.key}: " if p.key else ""
            out.append("✗ " if p.severity == "error" else "! ", style)
            out.append(visible(f"{where}{key}{p.message}") + "\n")
        return out

    def _source(self, info: RecipeInfo | None) -> RenderableType:
        if info is None or not info.shown_text:
            return Text("")
        dark = self.app.current_theme.dark
        surface = self.rich_style.bgcolor  # the pane's own: $surface
        syntax = Syntax(visible(info.shown_text), "toml", theme="monokai" if dark else "default",
                        line_numbers=True, word_wrap=True,
                        background_color=surface.name if surface is not None else None)
        return Group(Text(visible(info.shown_path), "bold"), syntax)
