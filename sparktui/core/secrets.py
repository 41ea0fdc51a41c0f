"""Secrets in a rank's env and args: masked on screen, in saved plans, events and error messages
unless asked for, and never recoverable from the plan hash on a container label.

Built-in rules: an env name containing KEY, TOKEN, SECRET, PASSWORD, PASS, AUTH or CREDENTIAL;
a flag in ``args`` one of whose words (split at ``-`` and ``_``) ends with one of them
(``--api-key``, ``--hf-token``; not ``--max-total-tokens`` nor ``--tokenizer``). A recipe adds
its own with ``secret_env = ["NAME", ...]`` and ``secret_args = ["--flag", ...]``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import re
import secrets as _random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sparktui.core.errors import ConfigError
from sparktui.core.names import UnsafeName, child
from sparktui.core.private import private_dir
from sparktui.core.problems import Problem
from sparktui.core.redact import MASK, Redactor
from sparktui.core.tomlsource import parse_toml

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASS", "AUTH", "CREDENTIAL")
KEY_BYTES = 32

Conceal = Callable[[str], str]
"""What a secret value becomes in a rendering: itself, the mask, or a keyed digest."""


def is_secret(name: str, extra: Iterable[str] = ()) -> bool:
    """An env name that holds a secret: a built-in marker in it, or named by ``secret_env``."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS) or name in extra


def is_secret_flag(flag: str, extra: Iterable[str] = ()) -> bool:
    """A flag whose value is a secret: one of its words ends with a marker, or named by
    ``secret_args``."""
    return flag in extra or (flag.startswith("--") and _secret_words(flag))


@functools.lru_cache(maxsize=4096)
def _secret_words(flag: str) -> bool:
    words = re.split(r"[-_]+", flag.lstrip("-").upper())
    return any(w.endswith(m) for w in words for m in SECRET_MARKERS) or any(
        w in ("CREDENTIALS", "SECRETS") for w in words)


def mask_env(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    names = tuple(extra)
    return {k: (MASK if is_secret(k, names) and v else v) for k, v in env.items()}


@dataclass(frozen=True)
class SecretRules:
    """The built-in rules plus a recipe's own ``secret_env`` names and ``secret_args`` flags."""

    env: tuple[str, ...] = ()
    args: tuple[str, ...] = ()

    def env_secret(self, name: str) -> bool:
        return is_secret(name, self.env)

    def arg_positions(self, argv: Sequence[str]) -> dict[int, int]:
        """``{index: where the secret starts in that token}``: the token after a secret flag
        (``--api-key X``: 0) or the value part of ``--api-key=X`` (after the ``=``)."""
        out: dict[int, int] = {}
        for i, token in enumerate(argv):
            flag, eq, _value = token.partition("=")
            if eq and is_secret_flag(flag, self.args):
                out[i] = len(flag) + 1
            elif not eq and is_secret_flag(token, self.args) and i + 1 < len(argv) \
                    and not argv[i + 1].startswith("--"):
                out[i + 1] = 0
        return out

    def conceal_env(self, env: Mapping[str, str], conceal: Conceal) -> dict[str, str]:
        return {k: (conceal(v) if v and self.env_secret(k) else v) for k, v in env.items()}

    def conceal_args(self, argv: Sequence[str], conceal: Conceal) -> list[str]:
        out = list(argv)
        for i, at in self.arg_positions(argv).items():
            if out[i][at:]:
                out[i] = out[i][:at] + conceal(out[i][at:])
        return out

    def values(self, env: Mapping[str, str], argv: Sequence[str]) -> list[str]:
        """Every secret value in ``env`` and ``argv`` (what free text is searched for), the
        passwords of URLs (``https://user:PASS@host``) in any of them included."""
        found = [v for k, v in env.items() if v and self.env_secret(k)]
        found += [argv[i][at:] for i, at in self.arg_positions(argv).items() if argv[i][at:]]
        found += [m.group(2) for text in (*env.values(), *argv)
                  for m in URL_CREDENTIALS.finditer(text)]
        return found


URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:)([^\s/?#@]+)(?=@)")
"""The password of ``scheme://user:password@host``: a secret wherever it is written."""


def conceal_text(text: str, values: Sequence[str], conceal: Conceal) -> str:
    """``text`` with a URL's password and every known secret value in it concealed (a secret
    inside ``sh -c "... $KEY ..."``, a mount, another env value); ``values`` longest first."""
    if "://" in text:
        text = URL_CREDENTIALS.sub(lambda m: m.group(1) + conceal(m.group(2)), text)
    for value in values:
        if value in text:
            text = text.replace(value, conceal(value))
    return text


def masked(_value: str) -> str:
    return MASK


def shown(value: str) -> str:
    return value


def keyed(key: bytes) -> Conceal:
    """A secret as an HMAC-SHA256 under ``key``: a change of the secret changes it, but without
    the key no number of guesses can be checked against it."""
    def digest(value: str) -> str:
        return "hmac:" + hmac.new(key, value.encode("utf-8", "surrogatepass"),
                                  hashlib.sha256).hexdigest()[:32]
    return digest


# -- a recipe that may not validate: its error messages quote no secret ----------------------

def _raw_rules(data: dict[str, Any]) -> SecretRules:
    """The secret rules of a recipe that may not validate (for its error messages)."""
    def names(key: str) -> tuple[str, ...]:
        raw = data.get(key)
        return tuple(x for x in raw if isinstance(x, str)) if isinstance(raw, list) else ()
    return SecretRules(names("secret_env"), names("secret_args"))


def _raw_argv(value: Any) -> list[str]:
    return [t if isinstance(t, str) else "" for t in value] if isinstance(value, list) else []


def secret_path(data: dict[str, Any]) -> Callable[[tuple[str | int, ...]], bool]:
    """Whether a key path of the recipe ``data`` holds a secret value (``env.HF_TOKEN``, the
    value after ``--api-key`` in ``args``)."""
    rules = _raw_rules(data)
    positions = {key: rules.arg_positions(_raw_argv(data.get(key))) for key in ("args", "entrypoint")}

    def secret(path: tuple[str | int, ...]) -> bool:
        if len(path) >= 2 and path[0] == "env" and isinstance(path[1], str):
            return rules.env_secret(path[1])
        if len(path) >= 2 and path[0] in positions and isinstance(path[1], int):
            return path[1] in positions[str(path[0])]
        return False
    return secret


def _redactor(data: dict[str, Any]) -> Redactor:
    """Masks the recipe's secret values in any sentence about it."""
    rules = _raw_rules(data)
    env = data.get("env")
    env = {k: v for k, v in env.items() if isinstance(v, str)} if isinstance(env, dict) else {}
    return Redactor(rules.values(env, _raw_argv(data.get("args"))) +
                    rules.values({}, _raw_argv(data.get("entrypoint"))))


def redact_problems(problems: list[Problem], data: dict[str, Any]) -> list[Problem]:
    redactor = _redactor(data)
    if not redactor:
        return problems
    return [replace(p, message=redactor.text(p.message)) for p in problems]


def plan_key(state_root: Path, cluster: str) -> bytes:
    """The cluster's random key for plan hashes, ``<state>/keys/<cluster>.key``: created once,
    0600 in a 0700 folder, never following a link. Two processes creating it at once agree: the
    file appears whole or not at all (written aside, then linked into place)."""
    folder = state_root / "keys"
    private_dir(folder)
    try:
        path = child(folder, f"{cluster}.key", "plan key of cluster")
    except UnsafeName as exc:  # one error type for callers: the key cannot be used
        raise OSError(str(exc)) from None
    for _ in range(3):
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                key = f.read(KEY_BYTES + 1)
            if len(key) == KEY_BYTES:
                return key
            raise OSError(f"{path} is not a sparktui key ({len(key)} bytes); remove it and a new "
                          "one is made (running containers then show their plan as changed)")
        tmp = folder / f".{cluster}.key.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(_random.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # another process was first: use its key
        tmp.unlink()
    raise OSError(f"cannot create the plan key {path}")


# -- a recipe's source, as a view shows it ----------------------------------------------------

def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def mask_source(text: str) -> str:
    """A recipe's TOML source with every secret value masked in place (``HF_TOKEN =
    "********"``, ``"--api-key=********"``) by the rules the plan masks with, and every other
    occurrence of a secret value (a comment, another key) masked as free text; the rest verbatim.
    A source that does not parse gets the built-in rules line by line."""
    try:
        source = parse_toml(text)
    except ConfigError:
        return _mask_unparsed(text)
    data = source.data
    rules = _raw_rules(data)
    argvs = {key: _raw_argv(data.get(key)) for key in ("args", "entrypoint")}
    positions = {key: rules.arg_positions(argv) for key, argv in argvs.items()}
    edits: list[tuple[int, int, str]] = []
    for path, (start, end) in source.spans.items():
        if len(path) != 2:
            continue
        head, item = path
        if head == "env" and isinstance(item, str) and rules.env_secret(item):
            shown = MASK
        elif head in positions and isinstance(item, int) and item in positions[str(head)]:
            token = argvs[str(head)][item]
            shown = token[:positions[str(head)][item]] + MASK
        else:
            continue
        lines = source.text.count("\n", start, end)  # keep the line numbers problems point at
        edits.append((start, end, _toml_string(shown) + "\n" * lines))
    masked_text = source.text
    for start, end, new in sorted(edits, reverse=True):
        masked_text = masked_text[:start] + new + masked_text[end:]
    return _redactor(data).text(masked_text)


_STRING = r"""("(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
_KEY_VALUE = re.compile(r"""(?<![\w.-])(["']?)([A-Za-z_][\w-]*)\1(\s*=\s*)""" + _STRING[:-1]
                        + r"""|[^\s,#}\]"']+)""")
_FLAG_EQ = re.compile(r"""(["'])(--[\w-]+)=([^"'\n]*)\1""")
_FLAG_NEXT = re.compile(r"""(["'])(--[\w-]+)\1(\s*,\s*)""" + _STRING)


def _mask_unparsed(text: str) -> str:
    """Best effort for a source TOML cannot read: ``NAME = value`` with a secret-looking name,
    ``"--api-key=value"`` and ``"--api-key", "value"``; then those values wherever else they
    appear."""
    found: list[str] = []

    def key(m: re.Match[str]) -> str:
        if not is_secret(m.group(2)):
            return m.group(0)
        found.append(m.group(4).strip("\"'"))
        return f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}\"{MASK}\""

    def flag_eq(m: re.Match[str]) -> str:
        if not is_secret_flag(m.group(2)) or not m.group(3):
            return m.group(0)
        found.append(m.group(3))
        return f"{m.group(1)}{m.group(2)}={MASK}{m.group(1)}"

    def flag_next(m: re.Match[str]) -> str:
        if not is_secret_flag(m.group(2)):
            return m.group(0)
        found.append(m.group(4).strip("\"'"))
        return f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}\"{MASK}\""

    masked_text = _FLAG_NEXT.sub(flag_next, _FLAG_EQ.sub(flag_eq, _KEY_VALUE.sub(key, text)))
    return Redactor(found).text(masked_text)
