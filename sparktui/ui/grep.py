"""The live grep: a regex over log lines; a leading ``!`` keeps the lines that do NOT match.

Smart case, as ripgrep and less do it: a pattern without capitals ignores case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class LineFilter:
    text: str
    regex: re.Pattern[str] | None = None
    invert: bool = False
    error: str | None = None

    @classmethod
    def parse(cls, text: str) -> LineFilter:
        invert = text.startswith("!")
        body = text[1:] if invert else text
        if not body:
            return cls(text, None, invert)
        flags = 0 if any(ch.isupper() for ch in body) else re.IGNORECASE
        try:
            regex = re.compile(body, flags)
        except re.error as exc:
            return cls(text, None, invert, f"bad regex: {exc}")
        return cls(text, regex, invert)

    @property
    def active(self) -> bool:
        """Whether it hides anything (an empty or bad pattern shows every line)."""
        return self.regex is not None and self.error is None

    @property
    def highlights(self) -> bool:
        return self.active and not self.invert

    def matches(self, text: str) -> bool:
        if self.regex is None:
            return True
        return (self.regex.search(text) is None) if self.invert else (self.regex.search(text) is not None)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the pattern matches in ``text`` (nothing for an inverted filter)."""
        if not self.highlights or self.regex is None:
            return []
        return [(m.start(), m.end()) for m in self.regex.finditer(text) if m.end() > m.start()]


NO_FILTER = LineFilter("")
