"""The one grep over log lines, for the console and ``sparktui logs --grep`` alike.

A regex searched in each line; a leading ``!`` keeps the lines that do NOT match. Smart case, as
ripgrep and less do it: a pattern without capitals ignores case. The regex runs in RE2
(``core.linear``): in time linear in the line, whatever was typed.
"""

from __future__ import annotations

from sparktui.core.errors import SparkError
from sparktui.core.linear import PatternError, Regex

_META = frozenset("\\.^$|?*+()[]{}")


class LineFilter:
    """A grep as typed: ``text``, its ``regex`` (None: nothing typed, or a bad regex, then
    ``error``), ``invert`` for a leading ``!``. A value: compared and hashed by all four. A
    plain class, not a NamedTuple: ``typing`` is not imported on the path of ``sparktui logs``
    (2 ms of a grep over a million lines)."""

    __slots__ = ("_fold", "_needle", "error", "invert", "regex", "text")

    def __init__(self, text: str, regex: Regex | None = None, invert: bool = False,
                 error: str | None = None) -> None:
        self.text = text
        self.regex = regex
        self.invert = invert
        self.error = error
        # a pattern of plain ASCII characters is looked for with ``in`` in an ASCII line (the
        # console filters its windows, 40,000 lines, on the event loop: RE2's binding costs
        # 0.9 us a call, ``in`` 0.1 us); lowercased when ignoring case, which over ASCII folds
        # as RE2 does
        pattern = regex.pattern if regex is not None else ""
        plain = bool(pattern) and pattern.isascii() and not any(ch in _META for ch in pattern)
        self._fold = regex is not None and regex.ignore_case
        self._needle = (pattern.lower() if self._fold else pattern) if plain else None

    def _key(self) -> tuple[str, Regex | None, bool, str | None]:
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
        try:
            regex = Regex(body, ignore_case=not any(ch.isupper() for ch in body))
        except PatternError as exc:  # the position is counted in what was typed, ! included
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
        needle = self._needle
        if needle is not None and text.isascii():
            return (needle in (text.lower() if self._fold else text)) != self.invert
        return self.regex.search(text) != self.invert

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the pattern matches in ``text`` (nothing for an inverted filter)."""
        if not self.highlights or self.regex is None:
            return []
        return self.regex.spans(text)


NO_FILTER = LineFilter("")
