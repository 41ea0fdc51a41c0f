"""sparktui: one keyboard-driven console for LLM inference engines on small GPU clusters."""

from __future__ import annotations

import warnings

__version__ = "0.1.0"

# cryptography 51 deprecates DSA, and asyncssh names its DSA types at import: five warnings on
# every command's stderr, which no operator can act on (sparktui never makes a DSA key; a node
# that offers one is still verified against known_hosts). Only that warning, only from asyncssh.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")
