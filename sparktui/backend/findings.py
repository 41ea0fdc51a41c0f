"""A line of ``doctor``: what the doctor's checks and a runtime's own preflight
(``runtimes.base.Preflight``) both give, in a module of its own so the two need not import each
other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["passed", "warned", "failed"]


@dataclass(frozen=True)
class Finding:
    node: str
    check: str
    verdict: Verdict
    sentence: str

    def to_json(self) -> dict[str, str]:
        return {"node": self.node, "check": self.check, "verdict": self.verdict,
                "sentence": self.sentence}


