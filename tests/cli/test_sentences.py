"""Broken input gets one sentence naming the file and key (or what to do) and exit code 2, in
well under a second: no traceback, no hang. Each case here used to be a traceback or a hang."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import asyncssh
import pytest

from sparktui.cli import exits, main
from tests.conftest import RECIPES, ROOT

DEMO = RECIPES / "demo-tp4"
TRACEBACK = "Traceback (most recent call last):\n  File"


def cluster_file(tmp_path: Path, ssh: str = 'user = "root"\n', host: str = "127.0.0.1:2222",
                 extra: str = "") -> Path:
    path = tmp_path / "cluster.toml"
    known = tmp_path / "known_hosts"
    known.write_text("")
    nodes = "".join(f'[[nodes]]\nname = "n{i}"\nhost = "{host}"\n' for i in range(4))
    path.write_text(f'name = "c"\nhf_cache = "/hf"\n{extra}[ssh]\n{ssh}known_hosts = "{known}"\n'
                    f"{nodes}")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    started = time.monotonic()
    code = main(list(argv))
    took = time.monotonic() - started
    out = capsys.readouterr()
    text = out.out + out.err
    assert TRACEBACK not in text
    assert took < 1.0 or argv[0] in ("up", "status", "down"), f"{argv[0]} took {took:.2f} s"
    return code, " ".join(text.split())


def test_node_port_over_65535(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, text = run(capsys, "plan", str(DEMO), "--cluster", str(cluster_file(tmp_path, host="n:99999")))
    assert code == exits.USAGE
    assert "cluster.toml:8:1: error: nodes[0].host: port 99999 is not a TCP port (1-65535)" in text


def test_identity_file_missing_or_encrypted(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    missing = cluster_file(tmp_path, ssh=f'user = "root"\nidentity = "{tmp_path}/nope"\n')
    code, text = run(capsys, "status", str(DEMO), "--cluster", str(missing))
    assert code == exits.USAGE
    assert f"cluster.toml:5:1: error: ssh.identity: identity file {tmp_path}/nope does not exist" in text
    assert "cannot reach" not in text
    key = tmp_path / "id_locked"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key), "pkcs8-pem", passphrase="pw")
    key.chmod(0o600)
    locked = cluster_file(tmp_path, ssh=f'user = "root"\nidentity = "{key}"\n')
    agent = tmp_path / "agent.sock"
    agent.touch()  # stands for a running agent: only whether its socket exists is read
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent))
    code, text = run(capsys, "up", str(DEMO), "--cluster", str(locked))
    assert code == exits.USAGE
    assert (f"ssh.identity: identity file {key} is encrypted and sparktui does not ask for "
            f"passphrases: leave ssh.identity unset and load the key into ssh-agent (ssh-add {key}), "
            "or use a key without a passphrase") in text
    monkeypatch.delenv("SSH_AUTH_SOCK")
    code, text = run(capsys, "up", str(DEMO), "--cluster", str(locked))
    assert code == exits.USAGE
    assert (f"ssh.identity: identity file {key} is encrypted and sparktui does not ask for "
            "passphrases, and no ssh-agent is running (SSH_AUTH_SOCK is not set): start one "
            f'(eval "$(ssh-agent)"), ssh-add {key}, leave ssh.identity unset and run sparktui from '
            "that shell; or use a key without a passphrase") in text


def test_identity_file_readable_by_others(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A private key other users can read is no longer private: refused before connecting, as
    OpenSSH refuses it, with the fix. Without ssh.identity, the default keys asyncssh would
    offer from ~/.ssh are held to the same rule."""
    key = tmp_path / "id_open"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    key.chmod(0o644)
    cluster = cluster_file(tmp_path, ssh=f'user = "root"\nidentity = "{key}"\n')
    code, text = run(capsys, "status", str(DEMO), "--cluster", str(cluster))
    assert code == exits.USAGE
    assert (f"cluster.toml:5:1: error: ssh.identity: identity file {key} can be read by other users "
            f"(mode 0644) and is refused, as OpenSSH refuses it: run chmod 600 {key}") in text
    assert "cannot reach" not in text
    key.chmod(0o600)
    code, text = run(capsys, "status", str(DEMO), "--cluster", str(cluster))
    assert "can be read by other users" not in text

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    default = home / ".ssh" / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(default))
    default.chmod(0o640)
    monkeypatch.setenv("HOME", str(home))
    code, text = run(capsys, "status", str(DEMO), "--cluster", str(cluster_file(tmp_path)))
    assert code == exits.USAGE
    assert ("ssh.identity: identity file ~/.ssh/id_ed25519 can be read by other users (mode 0640) "
            "and is refused, as OpenSSH refuses it: run chmod 600 ~/.ssh/id_ed25519") in text


def test_no_ssh_user_logs_in_as_this_user(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A cluster without ssh.user used to be a TypeError: now it is ssh's own default, and the
    failure (nothing listens there) is the node's sentence."""
    code, text = run(capsys, "status", str(DEMO), "--cluster", str(cluster_file(tmp_path, ssh="",
                                                                                 host="127.0.0.1:1")))
    assert code == 0  # status reports unreachable nodes as warnings
    assert "warning: n0: connection to 127.0.0.1:1 refused (is sshd running?)" in text


def test_deep_nesting_huge_file_and_long_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "recipe.toml").write_text("engine = 'sglang'\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    code, text = run(capsys, "plan", str(deep))
    assert code == exits.USAGE and "recipe.toml:2: error: nested more than 16 levels deep" in text
    assert run(capsys, "validate", str(deep))[0] == 1  # validate keeps its documented 1
    huge = tmp_path / "huge"
    huge.mkdir()
    (huge / "recipe.toml").write_text("# padding\n" * 1_000_000)  # 10 MB
    code, text = run(capsys, "validate", str(huge))
    assert code == 1 and "recipe.toml: error: 9.5 MiB; a recipe or cluster file is at most 256 KiB" in text
    code, text = run(capsys, "plan", "a" * 300)
    assert code == exits.USAGE and "cannot look up 'aaaa" in text and "File name too long" in text
    long_src = DEMO.joinpath("recipe.toml").read_text() + (
        '\n[[staging]]\nkind = "sparse-rows"\nid = "engram"\ndst = "/tmp/x"\nmin_free = "1G"\n'
        f'src = "/{"s" * 300}/{"t" * 5000}"\n')
    (huge / "recipe.toml").write_text(long_src)
    code, text = run(capsys, "plan", str(huge))
    assert code == 0, text


def test_world_size_limits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "big"
    folder.mkdir()
    text = DEMO.joinpath("recipe.toml").read_text()
    (folder / "recipe.toml").write_text(text.replace("tensor_parallel_size = 4",
                                                     "tensor_parallel_size = 100000"))
    code, out = run(capsys, "plan", str(folder))
    assert code == exits.USAGE and "tensor_parallel_size: Input should be less than or equal to 4096" in out
    (folder / "recipe.toml").write_text(text.replace("required_nodes = 4", "required_nodes = 100000"))
    code, out = run(capsys, "plan", str(folder))
    assert code == exits.USAGE and "required_nodes: Input should be less than or equal to 256" in out
    (folder / "recipe.toml").write_text(text.replace('timeout = "2m"', 'timeout = "' + "9" * 40 + 's"'))
    code, out = run(capsys, "plan", str(folder))
    assert code == exits.USAGE and "boot.timeout: duration" in out and "longer than 30 days" in out


def test_duplicate_key_names_the_key_and_both_lines(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    folder = tmp_path / "dup"
    folder.mkdir()
    text = DEMO.joinpath("recipe.toml").read_text()
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("TP_SIZE")) + 1
    (folder / "recipe.toml").write_text(text.replace('TP_SIZE = "4"\n', 'TP_SIZE = "4"\n"TP_SIZE" = "8"\n'))
    code, out = run(capsys, "plan", str(folder))
    assert code == exits.USAGE
    assert (f"recipe.toml:{first + 1}:1: error: env.TP_SIZE: set twice, on line {first} and again "
            f"on line {first + 1}") in out


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run as a user without a passwd entry")
def test_no_home_folder(tmp_path: Path) -> None:
    """A user with no passwd entry and no HOME: one sentence, exit 2, no literal ~ folder."""
    tmp_path.chmod(0o777)
    proc = subprocess.run(["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups",
                           sys.executable, "-m", "sparktui", "plan", "demo-tp4"],
                          cwd=tmp_path, env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == exits.USAGE, proc.stderr
    assert TRACEBACK not in proc.stderr
    assert "sparktui cannot tell this user's home folder" in proc.stderr
    assert not list(tmp_path.iterdir())  # no "~" folder
