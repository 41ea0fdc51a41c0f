"""The project's error types: sentences, not tracebacks; a file that cannot be used carries its
``Problem``s (``core.problems``), each naming the file, the key path and the line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

TYPE_CHECKING = False  # ``typing`` is not imported on the path of ``sparktui logs`` (2 ms)
if TYPE_CHECKING:
    from sparktui.core.problems import Problem

class SparkError(Exception):
    """Base of every error sparktui reports as a sentence rather than a traceback."""


class SetupError(SparkError):
    """This machine's setup stops sparktui before it tried anything (no home folder): the CLI
    exits 2, as for a file it cannot use."""


NO_HOME = ("sparktui cannot tell this user's home folder (HOME is not set and the user has no "
           "passwd entry): set HOME, or XDG_CONFIG_HOME, XDG_STATE_HOME and HF_HOME")


def user_home() -> Path:
    """The user's home folder; ``SetupError`` with what to do when there is none (rather than
    ``Path.home``'s RuntimeError, or a literal ``~`` folder from ``expanduser``)."""
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError):
        raise SetupError(NO_HOME) from None
    if not home.is_absolute():
        raise SetupError(NO_HOME)
    return home


def absolute_dir(path: str | Path, what: str) -> Path:
    """``path`` if absolute; ``SetupError`` naming ``what`` otherwise (platformdirs answers
    ``~/.local/state/...`` unexpanded when there is no home)."""
    p = Path(path)
    if not p.is_absolute():
        raise SetupError(f"{NO_HOME} ({what} came out as {str(p)[:200]!r})")
    return p


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
