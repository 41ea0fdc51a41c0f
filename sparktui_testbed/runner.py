"""Running host commands with a deadline and a readable failure.

Every step of bringing nodes up shells out (ip, nsenter, ssh-keygen, docker, ...). These
helpers give each command a timeout and a clean environment, turn any failure into one
TestbedError that names the node and the step, and run per-node work in threads while still
reporting every node that failed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .config import DAEMON_PATH, T_CMD

_T0 = time.monotonic()
_verbose = False


class TestbedError(RuntimeError):
    """A step failed; the message names the node (if any) and the step."""

    __test__ = False  # not a pytest test class


def set_verbose(verbose: bool | None) -> None:
    """Turn progress lines on stderr on or off (None: leave as is)."""
    global _verbose
    if verbose is not None:
        _verbose = verbose


def log(msg: str) -> None:
    if _verbose:
        print(f"[testbed {time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def daemon_env() -> dict[str, str]:
    env = {"PATH": DAEMON_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    return env


def run(
    cmd: Sequence[str],
    *,
    what: str,
    timeout: float = T_CMD,
    check: bool = True,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    try:
        cp = subprocess.run(
            list(cmd),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=env or daemon_env(),
            cwd="/",
        )
    except subprocess.TimeoutExpired as e:
        raise TestbedError(f"{what}: timed out after {timeout:.0f}s: {shlex.join(cmd)}") from e
    except FileNotFoundError as e:
        raise TestbedError(f"{what}: command not found: {cmd[0]}") from e
    if check and cp.returncode != 0:
        err = (cp.stderr or cp.stdout or b"").decode(errors="replace").strip()
        raise TestbedError(f"{what}: `{shlex.join(cmd)}` exited {cp.returncode}: {err[-2000:]}")
    return cp


def tail(path: str | Path, lines: int = 15) -> str:
    try:
        data = Path(path).read_bytes()[-8000:].decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join("    " + ln for ln in data.splitlines()[-lines:])


@contextlib.contextmanager
def step(node: str | None, step: str) -> Iterator[None]:
    try:
        yield
    except TestbedError as e:
        prefix = f"{node}: {step}" if node else step
        if str(e).startswith(prefix):
            raise
        raise TestbedError(f"{prefix}: {e}") from e
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        prefix = f"{node}: {step}" if node else step
        raise TestbedError(f"{prefix}: {type(e).__name__}: {e}") from e


_R = TypeVar("_R")


def parallel(items: Sequence[Any], fn: Callable[[Any], _R]) -> list[_R]:
    """Run fn over items in threads; re-raise the first failure (others are reported too)."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(items)) as ex:
        futs = [ex.submit(fn, x) for x in items]
        results: list[_R] = []
        errors: list[BaseException] = []
        for f in futs:
            try:
                results.append(f.result())
            except BaseException as e:  # collected and re-raised below
                errors.append(e)
        if errors:
            if len(errors) > 1:
                msgs = "\n".join(f"  - {e}" for e in errors)
                raise TestbedError(f"{len(errors)} nodes failed:\n{msgs}") from errors[0]
            raise errors[0]
        return results
