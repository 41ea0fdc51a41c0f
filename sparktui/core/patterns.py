"""Boot-line patterns: literal text where ``...`` stands for any text, or ``re:`` + a regex.

Both run in RE2 (``core.linear``), on every line a rank prints while it boots: a pattern cannot
make the search of a line take longer than the line is long.
"""

from __future__ import annotations

from sparktui.core.linear import PatternError, Regex, escape

REGEX_PREFIX = "re:"
WILDCARD = "..."


def compile_pattern(pattern: str) -> Regex:
    """Compile a boot-check pattern; raises ``ValueError`` with a sentence on a bad regex.

    Literal patterns match anywhere in a line (log prefixes such as timestamps vary), and the
    operator's ``...`` is a lazy wildcard, exactly as the engine docs write their must-show lines.
    """
    if pattern.startswith(REGEX_PREFIX):
        body = pattern[len(REGEX_PREFIX):]
        try:
            return Regex(body)
        except PatternError as exc:
            raise ValueError(f"bad regular expression {body!r}: {exc}") from None
    if not pattern.strip():
        raise ValueError("an empty pattern would match every line")
    return Regex(".*?".join(escape(p) for p in pattern.split(WILDCARD)))
