"""Every fixed name, address, path and timeout of the test cluster, in one place.

The state dir, bridge, namespace names and image recipe are shared by the test suite, the
benchmarks and people running the CLI; a running testbed is found again by these names, so
they must not drift between modules (or between versions: a testbed brought up by an older
checkout is still recognised and torn down).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

INSTANCE_ENV = "SPARKTUI_TESTBED_INSTANCE"
"""A second test cluster beside the first (0, the default, is the first): its own names, subnet
and state dir, so that a lane of the suite that injects faults into every node (the chaos
soak) runs while another lane uses the first one."""


def _instance() -> int:
    raw = os.environ.get(INSTANCE_ENV, "0") or "0"
    if not raw.isdigit() or int(raw) > 9:
        raise SystemExit(f"{INSTANCE_ENV}={raw!r}: use 0-9")
    return int(raw)


INSTANCE = _instance()
TAG = "sptb" if INSTANCE == 0 else f"sptb{INSTANCE}"
DEFAULT_STATE_DIR = "/run/sparktui-testbed" + ("" if INSTANCE == 0 else f"-{INSTANCE}")
STATE_ENV = "SPARKTUI_TESTBED"
STORAGE_DRIVER_ENV = "SPARKTUI_TESTBED_STORAGE_DRIVER"

BRIDGE = f"{TAG}-br0"
SUBNET_PREFIX = f"10.250.{INSTANCE}."
BRIDGE_IP = SUBNET_PREFIX + "1"
PREFIX_LEN = 24
FIRST_HOST = 11
MAX_NODES = 64
NODE_NETNS = TAG + "-node{index}"
NODE_VETH = TAG + "-v{index}"
NETNS_RE = re.compile(rf"^{TAG}-node(\d+)$")
VETH_RE = re.compile(rf"^{TAG}-v(\d+)$")

# the Slurm login node: not a compute node (no index of its own), below node0 on the bridge
LOGIN = "login"
LOGIN_INDEX = -1
LOGIN_HOST = FIRST_HOST - 1
LOGIN_NETNS = f"{TAG}-login"
LOGIN_VETH = f"{TAG}-vlogin"

# Slurm (Debian's slurmctld, slurmd, slurm-client, munge): private config, sockets and state
SLURM_CLUSTER = "sptb"
SLURM_PARTITION = "spark"
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURM_NODE_CPUS = 2
SLURM_NODE_MEMORY_MB = 1000
SECOND_USER = "sptb-other"  # a second unix user who submits jobs too (made once, kept)
SECOND_USER_GECOS = "sparktui testbed second operator"
# <repo>/sparktui/backend/runtimes/slurm_epilog.sh: the epilog shipped for operators
SLURM_EPILOG_SRC = (
    Path(__file__).resolve().parent.parent / "sparktui" / "backend" / "runtimes" / "slurm_epilog.sh"
)

IMAGE = "sparktui-demo:latest"
IMAGE_RECIPE_VERSION = "2"  # bump to force an image rebuild
IMAGE_CREATED = "2024-01-01T00:00:00Z"
IMAGE_MTIME = 1704067200  # every file in the image gets this mtime (reproducible layer)
IMAGE_ENV = [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONPATH=/opt/sparktui",
    "PYTHONUNBUFFERED=1",
    "LANG=C.UTF-8",
]
# <repo>/sparktui/demo: this package sits next to sparktui/ at the repository root
DEMO_SRC = Path(__file__).resolve().parent.parent / "sparktui" / "demo"

DAEMON_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SSHD = "/usr/sbin/sshd"
VERIFY_PORT = 29999

# timeouts (seconds); every wait is capped
T_CMD = 30.0
T_SSHD = 15.0
T_DOCKERD = 60.0
T_STOP = 15.0
T_LOAD = 180.0
T_RUN = 60.0
T_LOCK = 300.0
T_SLURM = 30.0  # munged, slurmctld, every slurmd registered
