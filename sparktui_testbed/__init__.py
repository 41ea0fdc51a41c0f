"""A real local test cluster for sparktui: N "nodes" on this one machine.

sparktui drives real clusters over SSH and Docker; its tests and benchmarks run against real
OpenSSH and Docker daemons rather than mocks, and this package provides them. It lives next to
`sparktui/` in the repository and is not part of the installed wheel.

Every node ``node{i}`` is

* a network namespace ``sptb-node{i}`` whose ``eth0`` (a veth) sits on the bridge
  ``sptb-br0`` (10.250.0.1/24) in the root namespace, with address 10.250.0.{11+i}/24;
* a persistent private mount namespace (``<state>/ns/node{i}``) in which ``/home`` is
  ``<state>/node{i}/home`` and ``/run`` (so ``/var/run``) is ``<state>/node{i}/run``;
* its own OpenSSH ``sshd`` on 10.250.0.{11+i}:22 (own ed25519 host key, root login by key);
* its own ``dockerd`` (``/var/run/docker.sock`` inside the node, which is
  ``<state>/node{i}/run/docker.sock`` from the root namespace) holding the image
  ``sparktui-demo:latest`` (busybox + Debian's CPython), same image id on every node.

Both daemons run inside the node's network and mount namespaces (``nsenter``). The state dir
(default ``/run/sparktui-testbed`` or ``$SPARKTUI_TESTBED``) holds the client key,
``known_hosts``, ``cluster.toml`` (sparktui's cluster file format) and ``testbed.json``.

Usage (as root, from the repository root)::

    python3 -m sparktui_testbed up [--nodes N] [--state DIR]
    python3 -m sparktui_testbed status [--state DIR] [--json]
    python3 -m sparktui_testbed down [--state DIR] [--purge]
    python3 -m sparktui_testbed stop-sshd NODE | start-sshd NODE
    python3 -m sparktui_testbed rekey NODE [--restore] [--update-known-hosts]
    python3 -m sparktui_testbed login-shell NODE [SHELL]   (no SHELL: the machine's own)
    python3 -m sparktui_testbed slurm [--user USER] CMD...   (sinfo, sbatch, ... on the login node)
    python3 -m sparktui_testbed stop-slurmd NODE [--down] | start-slurmd NODE
    python3 -m sparktui_testbed slurm-state NODE DOWN|DRAIN|RESUME [--reason TEXT]
    python3 -m sparktui_testbed stop-slurm

Importable: ``up(n, state_dir)``, ``down(state_dir)``, ``status(state_dir)``,
``load(state_dir)``, ``stop_sshd(state_dir, node)``, ``start_sshd(state_dir, node)``,
``rekey(state_dir, node, restore=False)``, ``login_shell(state_dir, node, shell)``,
``check_host()``; for Slurm ``slurm_command(state_dir, argv, user="root")``,
``slurm_states(state_dir)``, ``stop_slurmd(state_dir, node, down=False)``,
``start_slurmd(state_dir, node)``, ``set_slurm_state(state_dir, node, state, reason)``,
``stop_slurm(state_dir)``; ``Testbed.slurm`` (a ``Slurm`` record: the login node, SLURM_CONF,
the shared folder, the partition, the second user).

Slurm (slurm.py): a login node ``login`` (netns ``sptb-login``, 10.250.0.10, its own sshd whose
sessions get ``SLURM_CONF``, munged and slurmctld), a slurmd per node (tasks reach the node's
own dockerd at /var/run/docker.sock), partition ``spark`` of every node, ``<state>/shared`` at
the same path everywhere, the epilog sparktui ships (sparktui/backend/runtimes/slurm_epilog.sh),
and a second unix user ``sptb-other``.

Modules: config (names, paths, timeouts), runner (commands, errors, logging), layout (records,
state dir, lock, cluster file), procs, mounts, loginshell, netns, docker_api, image, daemons, verify,
host (check_host), slurm (the Slurm cluster), cluster (the lifecycle API), slurmctl (Slurm's
controls), cli.

Standard library only; Python 3.10+.
"""

from __future__ import annotations

from .cli import main
from .cluster import down, load, login_shell, rekey, start_sshd, status, stop_sshd, up
from .config import DEFAULT_STATE_DIR, IMAGE, IMAGE_RECIPE_VERSION, STATE_ENV
from .host import check_host
from .image import build_image
from .layout import Node, Paths, Slurm, Testbed, resolve_state_dir
from .runner import TestbedError
from .slurmctl import set_slurm_state, slurm_command, slurm_states, start_slurmd, stop_slurm, stop_slurmd

__all__ = [
    "DEFAULT_STATE_DIR",
    "IMAGE",
    "IMAGE_RECIPE_VERSION",
    "STATE_ENV",
    "Node",
    "Paths",
    "Slurm",
    "Testbed",
    "TestbedError",
    "build_image",
    "check_host",
    "down",
    "load",
    "login_shell",
    "main",
    "rekey",
    "resolve_state_dir",
    "set_slurm_state",
    "slurm_command",
    "slurm_states",
    "start_slurmd",
    "start_sshd",
    "status",
    "stop_slurm",
    "stop_slurmd",
    "stop_sshd",
    "up",
]
