"""Names that become paths or container names: run ids, recipe slugs, node and cluster names,
staging ids, local rank ids. Each is checked against one strict pattern, and the path it makes
must resolve inside its parent folder, so a name read from outside (a container label anyone on
the node can set) never writes anywhere else.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""Letters, digits, ``.``, ``_`` and ``-``; first a letter or digit; at most 128 characters.
Docker's own container-name rule, bounded: no ``/``, and never ``.``, ``..`` or ``~``."""


def name_rule(most: int = 128) -> str:
    """The rule in words, with the length of the kind of name (a recipe's is shorter)."""
    return f"letters, digits, '.', '_' and '-', starting with a letter or digit, at most {most}"


NAME_RULE = name_rule()


class UnsafeName(ValueError):
    """A name that cannot become a path or a container name; the message says which and why."""


def is_safe(name: object) -> bool:
    return isinstance(name, str) and NAME.fullmatch(name) is not None


def check_name(name: object, what: str) -> str:
    """``name`` when it is safe; ``UnsafeName`` naming ``what`` (``run id``) otherwise."""
    if not is_safe(name):
        shown = repr(name)[:80] if isinstance(name, str) else type(name).__name__
        raise UnsafeName(f"{what} {shown} is not a safe name ({NAME_RULE} characters)")
    assert isinstance(name, str)
    return name


def child(parent: Path, name: object, what: str) -> Path:
    """``parent / name``, once ``name`` is safe and the result (symlinks followed) is still
    directly inside ``parent``."""
    safe = check_name(name, what)
    path = parent / safe
    try:
        inside = path.resolve().parent == parent.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        inside = False
    if not inside:
        raise UnsafeName(f"{what} {safe!r} leads outside {parent}")
    return path
