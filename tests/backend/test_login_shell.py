"""The one string a node's login shell sees (``login_shell_command``), run by every shell a
node user may have (sh, dash, bash, zsh, fish, tcsh, those installed here): each one runs
exactly the argument list asked for, with hostile arguments, and none runs their payload."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.backend.nodeshell import login_shell_command
from tests.conftest import IN_CI
from tests.shellwords import payloads

SHELLS = ("sh", "dash", "bash", "zsh", "fish", "tcsh")
PRINT_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"
ECHO_STDIN = "import sys; sys.stdout.write(sys.stdin.read())"


def shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if IN_CI:  # ./dev test installs them
            pytest.fail(f"{name} is not installed")
        pytest.skip(f"{name} is not installed")
    return found


def as_login_shell(name: str, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """What sshd does with a command string: ``$SHELL -c <string>``."""
    return subprocess.run([shell(name), "-c", login_shell_command(argv)], input=stdin,
                          capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL if stdin is None else None)


@pytest.mark.parametrize("name", SHELLS)
def test_every_login_shell_runs_exactly_the_argv(name: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    words = [*payloads(str(marker)), ""]
    res = as_login_shell(name, [sys.executable, "-c", PRINT_ARGV, *words])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == words
    assert not marker.exists()


@pytest.mark.parametrize("name", SHELLS)
def test_each_hostile_word_alone_runs_no_payload(name: str, tmp_path: Path) -> None:
    """One word a command, as doctor sends a dst (``test -w <dst>``)."""
    marker = tmp_path / "marker"
    for word in payloads(str(marker)):
        res = as_login_shell(name, ["test", "-e", word])
        assert res.returncode == 1, (word, res.stderr)
        assert res.stderr == "", (word, res.stderr)
    assert not marker.exists()


@pytest.mark.parametrize("name", SHELLS)
def test_the_command_keeps_the_channels_stdin(name: str) -> None:
    """The staging agent reads its program from stdin: the wrapper must not eat any of it."""
    text = "line one\nline two: $(touch x) `id` \\' !!\n" * 1000
    res = as_login_shell(name, [sys.executable, "-c", ECHO_STDIN], stdin=text)
    assert res.returncode == 0, res.stderr
    assert res.stdout == text


@pytest.mark.parametrize("name", SHELLS)
def test_the_exit_status_is_the_commands(name: str) -> None:
    res = as_login_shell(name, [sys.executable, "-c", "import sys; sys.exit(7)"])
    assert res.returncode == 7


def test_the_login_shell_sees_only_characters_every_shell_reads_literally() -> None:
    text = login_shell_command([sys.executable, "-c", PRINT_ARGV, *payloads("/tmp/m")])
    prefix, quoted = text.split(" ", 2)[:2], text.split(" ", 2)[2]
    assert prefix == ["/bin/sh", "-c"]
    assert quoted.startswith("'") and quoted.endswith("'")
    assert not set(quoted[1:-1]) & set("'\\!\n")
    assert shlex.split(text)[:2] == ["/bin/sh", "-c"]
