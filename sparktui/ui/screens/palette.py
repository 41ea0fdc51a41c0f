"""Textual's command palette, made safe against keys that arrive before it is laid out and
results that arrive after it closed."""

from __future__ import annotations

from textual import work
from textual.command import CommandList, CommandPalette

PAGE_MOVES = frozenset({"page_up", "page_down"})


class Palette(CommandPalette):
    """Page up/down pressed while the command list has options but no size yet (just opened,
    results arriving) made Textual's ``OptionList`` index lines it had not built (KeyError).
    Until the list is laid out a page move has no page to move by: it is ignored."""

    def _action_command_list(self, action: str) -> None:
        if action in PAGE_MOVES and not self.query_one(CommandList).scrollable_content_region.height:
            return
        super()._action_command_list(action)

    def _watch__list_visible(self) -> None:
        """A search that ends as the palette closes (its list already removed: the console
        fuzz, seed 3, opened the palette again right after running a command from it) shows
        nothing; Textual's watcher looked for the list and raised NoMatches."""
        if self.query(CommandList):
            super()._watch__list_visible()


    @work(exclusive=True, group=CommandPalette._GATHER_COMMANDS_GROUP)
    async def _gather_commands(self, search_value: str) -> None:
        """The same for a search that starts as the palette closes: Textual's gatherer looks
        for the list first (NoMatches in the worker, which fails the app)."""
        if self.query(CommandList):
            await CommandPalette._gather_commands.__wrapped__(self, search_value)  # type: ignore[attr-defined]
