"""Can this machine run the testbed? The answer as a list of reasons it cannot.

The test fixture skips (or, under CI=true, fails) with these reasons instead of a traceback
from deep inside `up`, and `up` refuses early with them: Linux, root, the tools and daemons
it shells out to (Slurm's and MUNGE's daemons among them), busybox and a Debian CPython for the
image, and working `ip netns`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .config import DAEMON_PATH, SSHD
from .image import debian_python
from .runner import daemon_env


def check_host() -> list[str]:
    """Reasons this machine cannot run the testbed (empty list: it can)."""
    problems = []
    if sys.platform != "linux":
        return [f"not Linux ({sys.platform})"]
    if os.geteuid() != 0:
        problems.append("not root (the testbed needs root for netns, mounts and dockerd)")
    tools = [
        "ip",
        "nsenter",
        "unshare",
        "mount",
        "umount",
        "ssh-keygen",
        "dockerd",
        "containerd",
        "runc",
        "docker",
        # Slurm (slurmctld slurmd slurm-client munge) and what runs it as another user
        "slurmctld",
        "slurmd",
        "sinfo",
        "munged",
        "mungekey",
        "setpriv",
        "useradd",
    ]
    for tool in tools:
        if not shutil.which(tool, path=DAEMON_PATH):
            problems.append(f"`{tool}` not installed")
    if not os.access(SSHD, os.X_OK):
        problems.append(f"{SSHD} not installed (openssh-server)")
    if not (Path("/bin/busybox").exists() or Path("/usr/bin/busybox").exists()):
        problems.append("busybox not installed (busybox-static)")
    if not Path(debian_python()[0]).exists():
        problems.append("Debian python3 (/usr/bin/python3.X) not installed")
    if not problems and shutil.which("ip", path=DAEMON_PATH):
        cp = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10, env=daemon_env())
        if cp.returncode != 0:
            problems.append("`ip netns` does not work: " + cp.stderr.decode(errors="replace"))
    return problems
