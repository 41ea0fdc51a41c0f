"""Outside text in the console (recipe and cluster values, slugs, paths, patterns, nodes' and
engines' words, theme names, library errors): Textual ``Content``, never markup, its control,
C1 and format characters written out (``core.controls``), the rule the CLI's ``render.plain``
follows. Textual parses every plain ``str`` it is given for a border title, a palette hit or
its help, a ``Static`` or a toast as markup, where ``[@click=app.screenshot(...)]`` is an
action run by a click; ``Content`` is shown as it is."""

from __future__ import annotations

from textual.content import Content

from sparktui.core.controls import visible


def content(text: object) -> Content:
    """``text`` as text, never markup, its controls written out."""
    return Content(visible(text))
