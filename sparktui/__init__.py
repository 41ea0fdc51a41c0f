"""sparktui: one keyboard-driven console for LLM inference engines on small GPU clusters."""

from __future__ import annotations

__version__ = "0.1.0"
