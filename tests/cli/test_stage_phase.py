"""``sparktui stage`` prints each node's bar from its agent's report: the phase, the file and
the error are the node's words, written out like any outside text (issue 23: the phase was
printed raw, its escapes obeyed by the terminal)."""

from __future__ import annotations

import io

from rich.console import Console

from sparktui.backend.events import StagingProgress
from sparktui.cli import render
from sparktui.cli.ops import stage_fields

HOSTILE = "[@click=app.quit]x [b]x \x1b]0;t\x07 \x9b31m \u202eend"
WRITTEN = "[@click=app.quit]x [b]x \\x1b]0;t\\x07 \\x9b31m \\u202eend"


def printed(event: StagingProgress) -> str:
    """The bar's line as the terminal receives it (colours and all)."""
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system="truecolor")
    progress = render.transfers(console, phase_width=7, file=True, disable=False)
    with progress:
        task = progress.add_task("", total=None, node="node1", phase="", file="")
        progress.update(task, **stage_fields(event))  # type: ignore[arg-type]
    return out.getvalue()


def test_an_agents_phase_and_file_are_printed_as_text() -> None:
    text = printed(StagingProgress("node1", "weights", HOSTILE, HOSTILE, 5, 10))
    assert text.count(WRITTEN) == 2, text
    for raw in ("\x1b]0;t", "\x07", "\x9b", "\u202e"):
        assert raw not in text, (raw, text)


def test_an_agents_error_is_printed_as_text() -> None:
    text = printed(StagingProgress("node1", "weights", "failed", error=f"node1: {HOSTILE}"))
    assert WRITTEN in text and "\u202e" not in text and "\x9b" not in text, text
