"""The project's error type: every problem names the file, the key path and the line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
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


class SparkError(Exception):
    """Base of every error sparktui reports as a sentence rather than a traceback."""


class ConfigError(SparkError):
    """A recipe or cluster file that cannot be used; carries every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class RecipeError(ConfigError):
    """A recipe that cannot be loaded or planned."""


class ClusterError(ConfigError):
    """A cluster file that cannot be loaded."""


def display_path(path: Path | str | None) -> str | None:
    """A path as the operator typed it: relative to the working directory when below it."""
    if path is None:
        return None
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p)


def sentence(exc: BaseException) -> str:
    """An exception as one line for a notice or a detail column: the first line of its text,
    else its type name (``TimeoutError()`` says nothing else)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
