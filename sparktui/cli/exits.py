"""Exit codes of the command line, one meaning each, so a script can tell a boot that failed
from one that came up without a feature it needs (README, "Exit codes")."""

from __future__ import annotations

from sparktui.core.errors import SparkError

OK = 0
"""Done; after ``--wait``: every rank ready and every boot check passed."""
FAILED = 1
"""It did not work: a rank failed, the boot timed out, a node refused us (``validate``: the
recipe has errors, its documented verdict)."""
USAGE = 2
"""Nothing was tried: bad arguments (argparse's own code), a recipe or cluster file that cannot
be used, a rank that does not exist."""
CHECKS = 3
"""After ``--wait``: every rank ready, but at least one boot check failed (each printed)."""


class UsageError(SparkError):
    """A command line that asks for something that does not exist (exit ``USAGE``)."""
