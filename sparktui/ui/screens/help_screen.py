"""Every key of the main screen, grouped, as remapped by the user's config."""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from sparktui.ui.keys import ALL_KEYS, KEYS, RANK_KEYS, KeySpec, effective_key
from sparktui.ui.screens.dialog import Dialog

TIPS = (
    "Grep: / then a regex; a leading ! keeps the lines that do not match; all-lowercase ignores "
    "case. Enter keeps the filter, esc clears it; n / N step through the kept lines.",
    "Boot check patterns: literal text where ... matches anything, or re: followed by a regex.",
    "Select a rank with ↑ ↓ in the ranks table (tab moves between panels) or 1-9; r restarts it.",
    "Quitting never stops containers: the next start reattaches to them.",
    "Remap keys in config.toml under [keys], for example: restart = \"R\".",
)


class HelpScreen(Dialog[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "close", id="help-close"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = "sparktui · keys"
            dialog.border_subtitle = "esc close · ctrl+p every action by name"
            with VerticalScroll():
                yield Static(self._keys(), id="help-keys")
                yield Static(self._tips(), id="help-tips")

    def _display(self, spec: KeySpec) -> str:
        keymap = getattr(self.app, "keymap", {})
        keys = effective_key(spec, keymap).split(",")
        return " ".join(self.app.get_key_display(Binding(k.strip(), "")) for k in keys)

    def _keys(self) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_column(style=self.ink("accent") + Style(bold=True), no_wrap=True, justify="right")
        table.add_column()
        table.add_column(style=self.ink("muted"), no_wrap=True)
        groups: dict[str, list[KeySpec]] = {}
        for spec in KEYS:
            groups.setdefault(spec.group, []).append(spec)
        for group, specs in groups.items():
            table.add_row("", Text(group, "bold underline"), "")
            for spec in specs:
                table.add_row(self._display(spec), spec.description, spec.id)
            if group == "Logs":
                first, last = RANK_KEYS[0], RANK_KEYS[-1]
                table.add_row(f"{self._display(first)}-{self._display(last)}",
                              "Logs of rank 0-8 only (and select that rank)", "rank-1 … rank-9")
        table.add_row("", "", "")
        table.add_row("ctrl+p", "Command palette: every action, recipe and theme by name", "")
        table.add_row("tab", "Next panel", "")
        assert len(ALL_KEYS) == len(KEYS) + len(RANK_KEYS)
        return table

    def _tips(self) -> Text:
        return Text("\n".join(f"• {tip}" for tip in TIPS), self.ink("muted"))
