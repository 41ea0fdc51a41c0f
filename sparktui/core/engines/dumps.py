"""Where an engine prints its arguments, and how its line is read into ``{field: value}``.

SGLang logs ``server_args=ServerArgs(...)`` (the repr of its argument struct; 0.5.23's engine
entry logs ``server_args={...}``, the same fields as a dict) after its logger's
``[date time] `` prefix: every field. vLLM logs ``non-default args: {...}`` after
``(APIServer pid=N) INFO mm-dd hh:mm:ss [startup.py:96] ``: only the fields that differ from
its parser's defaults, and its version in ``vLLM server version X, serving model M``
(``vLLM API server version X`` in older builds). SGLang prints no version line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparktui.core.engines.reprread import ReprError, fields, read


@dataclass(frozen=True)
class ArgsDump:
    """One engine's dump line: found by ``marker`` (a literal), read from just after it."""

    marker: str
    complete: bool  # every field (SGLang), or only those that differ from the defaults (vLLM)
    version_pattern: str | None = None  # RE2/Python regex whose group 1 is the version
    every_rank: bool = True  # False: only the ranks that serve the API print it (vLLM)

    @property
    def pattern(self) -> str:
        """A regex for the lines the args check reads: the dump, and the version line."""
        parts = [re.escape(self.marker)]
        if self.version_pattern:
            parts.append(self.version_pattern)
        return "|".join(parts)

    def version(self, text: str) -> str | None:
        if self.version_pattern is None:
            return None
        m = re.search(self.version_pattern, text)
        return m.group(1) if m else None

    def read(self, text: str) -> dict[str, object] | None:
        """The fields of the dump in ``text``; None if ``text`` holds no dump; ``ReprError``
        with a reason when it holds one that cannot be read."""
        at = text.find(self.marker)
        if at < 0:
            return None
        value, _end = read(text, at + len(self.marker))
        found = fields(value)
        if found is None:
            raise ReprError(f"the dump is a {type(value).__name__}, not a dict or a call")
        return found
