"""The one grep over log lines, for the console and ``sparktui logs --grep`` alike.

A regex searched in each line; a leading ``!`` keeps the lines that do NOT match. Smart case, as
ripgrep and less do it: a pattern without capitals ignores case.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator

from sparktui.core.errors import SparkError


@contextlib.contextmanager
def quiet_regex() -> Iterator[None]:
    """Python's regex parser warns (``FutureWarning``) where a later Python may read a pattern
    otherwise (``[[``, ``&&`` in a class): the pattern is taken as this one reads it, and a
    warning printed over the console or into a grep's output is nothing an operator can act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


class LineFilter:
    """A grep as typed: ``text``, its ``regex`` (None: nothing typed, or a bad regex, then
    ``error``), ``invert`` for a leading ``!``. A value: compared and hashed by all four. A
    plain class, not a NamedTuple: ``typing`` is not imported on the path of ``sparktui logs``
    (2 ms of a grep over a million lines)."""

    __slots__ = ("error", "invert", "regex", "text")

    def __init__(self, text: str, regex: re.Pattern[str] | None = None, invert: bool = False,
                 error: str | None = None) -> None:
        self.text = text
        self.regex = regex
        self.invert = invert
        self.error = error

    def _key(self) -> tuple[str, re.Pattern[str] | None, bool, str | None]:
        return self.text, self.regex, self.invert, self.error

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LineFilter) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"LineFilter({self.text!r}, invert={self.invert}, error={self.error!r})"

    @classmethod
    def parse(cls, text: str) -> LineFilter:
        """What is typed so far, never raising: a bad regex is kept as ``error`` and an empty
        pattern (``""``, or ``"!"`` alone) filters nothing, so typing never breaks the view."""
        invert = text.startswith("!")
        body = text[1:] if invert else text
        if not body:
            return cls(text, None, invert)
        flags = 0 if any(ch.isupper() for ch in body) else re.IGNORECASE
        try:
            with quiet_regex():
                regex = re.compile(body, flags)
        except re.error as exc:  # the position is counted in what was typed, ! included
            where = f" at position {exc.pos + len(text) - len(body)}" if exc.pos is not None else ""
            return cls(text, None, invert, f"bad regex: {exc.msg}{where}")
        return cls(text, regex, invert)

    @classmethod
    def require(cls, text: str) -> LineFilter:
        """A pattern given whole (the command line): a bad regex, or nothing after ``!``, raises
        a ``SparkError`` naming the pattern instead of quietly showing every line."""
        f = cls.parse(text)
        if f.error is not None:
            raise SparkError(f"grep pattern {text!r}: {f.error}")
        if f.invert and f.regex is None:
            raise SparkError(f"grep pattern {text!r}: nothing after '!' (write !REGEX to keep the "
                             "lines that do not match REGEX)")
        return f

    @property
    def active(self) -> bool:
        """Whether it hides anything (an empty or bad pattern shows every line)."""
        return self.regex is not None and self.error is None

    @property
    def highlights(self) -> bool:
        return self.active and not self.invert

    def matches(self, text: str) -> bool:
        """Whether the line is kept."""
        if self.regex is None:
            return True
        return (self.regex.search(text) is None) if self.invert else (self.regex.search(text) is not None)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the pattern matches in ``text`` (nothing for an inverted filter)."""
        if not self.highlights or self.regex is None:
            return []
        return [(m.start(), m.end()) for m in self.regex.finditer(text) if m.end() > m.start()]


NO_FILTER = LineFilter("")
