"""Known secret values masked in free text (notices, details, events.jsonl).

Apart from ``core.secrets`` (which decides what is a secret, and imports a TOML parser and
hashing for it) so that the run store, on the path of ``sparktui logs``, imports only this.
"""

from __future__ import annotations

from collections.abc import Iterable

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from typing import Any

MASK = "********"
MIN_REDACT = 4
"""Secret values shorter than this are masked where they stand (env, args) but not searched
for in free text (a notice, a log-derived detail): a 2-character value would blot out half
the words of every sentence."""


class Redactor:
    """Masks known secret values wherever they appear in free text (notices, details, events)."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = sorted({v for v in values if len(v) >= MIN_REDACT}, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def lines(self, lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``(ts, text)`` pairs with the values masked in each text. A batch that holds none is
        returned as it is after one search of the whole batch per value (the usual case: a
        flood's batch of 2,000 lines costs a join and a search, not 2,000 of each)."""
        if not self.values:
            return lines
        joined = "\n".join(text for _, text in lines)
        if not any(value in joined for value in self.values):
            return lines
        return [(ts, self.text(text)) for ts, text in lines]

    def data(self, data: Any) -> Any:
        """Every string in ``data`` (dicts, lists, tuples) redacted; other values as they are."""
        if not self.values:
            return data
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {k: self.data(v) for k, v in data.items()}
        if isinstance(data, (list, tuple)):
            return [self.data(v) for v in data]
        return data
