"""Boot-line patterns: literal text where ``...`` stands for any text, or ``re:`` + a regex."""

from __future__ import annotations

import re

REGEX_PREFIX = "re:"
WILDCARD = "..."


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a boot-check pattern; raises ``ValueError`` with a sentence on a bad regex.

    Literal patterns match anywhere in a line (log prefixes such as timestamps vary), and the
    operator's ``...`` is a lazy wildcard, exactly as the engine docs write their must-show lines.
    """
    if pattern.startswith(REGEX_PREFIX):
        body = pattern[len(REGEX_PREFIX):]
        try:
            return re.compile(body)
        except re.error as exc:
            raise ValueError(f"bad regular expression {body!r}: {exc}") from None
    if not pattern.strip():
        raise ValueError("an empty pattern would match every line")
    parts = [re.escape(p) for p in pattern.split(WILDCARD)]
    return re.compile(".*?".join(parts))
