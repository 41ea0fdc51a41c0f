"""Recipe values that docker reads with a syntax of its own, checked at validation.

A bind is ``host:container:mode`` to docker, so a ``:`` inside either path moves the split (a
``host = "/data:/etc"`` became ``-v /data:/etc:/data``: the node's ``/data`` over the
container's ``/etc``); an environment entry is ``NAME=value``, so an ``=`` in a name moves that
split (``A=B`` became ``A=B=x``, the variable ``A``). Both are refused with their line instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from sparktui.core.problems import Problem
from sparktui.core.tomlsource import TomlSource

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A name a POSIX shell can read back (``$NAME``); docker itself only stops at ``=``."""


def mount_problems(source: TomlSource, mounts: Sequence[tuple[str, str]],
                   taken: Iterable[str] = ()) -> list[Problem]:
    """``mounts`` are ``extra_mounts``' ``(host, container)`` in order; ``taken`` the container
    paths sparktui mounts itself (the HF cache): docker refuses a container path mounted twice."""
    problems: list[Problem] = []
    seen: dict[str, int | None] = {path.rstrip("/") or "/": None for path in taken}
    for i, (host, container) in enumerate(mounts):
        for key, path in (("host", host), ("container", container)):
            if ":" in path:
                problems.append(source.problem(
                    ("extra_mounts", i, key),
                    f"{path!r} holds ':', which docker reads as the end of the path in "
                    "host:container:mode; use a path without ':' (a link to it, for instance)"))
        target = container.rstrip("/") or "/"
        if target in seen:
            where = (f"extra_mounts[{seen[target]}]" if seen[target] is not None
                     else "sparktui's own mount of the HF cache")
            problems.append(source.problem(
                ("extra_mounts", i, "container"),
                f"{container!r} is already mounted ({where}): docker refuses a container path "
                "mounted twice"))
        else:
            seen[target] = i
    return problems


def env_problems(source: TomlSource, names: Iterable[str]) -> list[Problem]:
    return [source.problem(
        ("env", name),
        f"env name {name[:80]!r} is not a variable name: docker cuts NAME=value at the first "
        "'=', and shells read only letters, digits and '_' (not first); rename it")
        for name in names if not ENV_NAME.fullmatch(name)]
