"""Hostile words for the login-shell tests: each would run ``touch <marker>`` if some shell's
parser ever read it as code (POSIX, fish and tcsh command substitution, quoting breakouts,
separators, newlines, history and variables). ``payloads(marker)`` fills in the marker."""

from __future__ import annotations

TEMPLATES = (
    "/srv/stage\\'$(touch {m})\\'\\'",  # the issue's fish breakout: \' ends fish's quote
    "/srv/stage\\'(touch {m})\\'",  # fish command substitution, bare parentheses
    "/srv/stage\\'\\$(touch {m})\\'",
    "/srv/$(touch {m})",
    "/srv/`touch {m}`",
    "/srv/(touch {m})",
    "/srv/x'; touch {m}; '",
    "/srv/x\"; touch {m}; \"",
    "/srv/x'\"$(touch {m})\"'",
    "/srv/x\\'; touch {m}; echo \\'",
    "/srv/x\\\\'; touch {m}; #",
    "/srv/x | touch {m}",
    "/srv/x & touch {m}",
    "/srv/x && touch {m}",
    "/srv/x\ntouch {m}",
    "/srv/x'\ntouch {m}\n'",
    "/srv/x\\\ntouch {m}",
    "/srv/x\rtouch {m}",
    "/srv/$HOME/${{IFS}}/$0",
    "/srv/!!/!touch/!-1",
    "/srv/x'!'`touch {m}`",
    "/srv/x'`touch {m}`'",
    "/srv/x{{a,b}}/*/?/~root",
    "/srv/x %s %n \\x41 \\u0041",
    "/srv/x\\",
    "/srv/x'",
    "/srv/x\"",
    "-c touch {m}",
    "/srv/caf\u00e9 and spaces  /\u202e",
)


def payloads(marker: str) -> list[str]:
    return [t.format(m=marker) for t in TEMPLATES]
