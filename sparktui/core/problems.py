"""One thing wrong in a recipe or cluster file, where it is: the file, the key path, the line.

Apart from ``core.errors`` (which only names it) so that a command which never reads a recipe
(``sparktui logs`` of an ended run) does not import ``dataclasses`` (and with it ``inspect``:
5 ms of its start).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or suspicious) in a recipe or cluster file.

    ``key`` is the dotted key path as an operator writes it (``staging[0].min_free``) so that
    the sentence can be acted on without reading a schema.
    """

    message: str
    key: str | None = None
    line: int | None = None
    column: int | None = None
    severity: Severity = "error"
    code: str = "schema"
    file: str | None = None

    def at(self, file: str | None) -> Problem:
        return replace(self, file=file)

    def location(self) -> str:
        parts = [self.file or "<recipe>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        key = f"{self.key}: " if self.key else ""
        return f"{self.location()}: {self.severity}: {key}{self.message}"
