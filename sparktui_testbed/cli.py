"""The command line: `python -m sparktui_testbed up|down|status|stop-sshd|start-sshd|rekey|login-shell`,
and for Slurm `slurm CMD...|stop-slurmd|start-slurmd|slurm-state|stop-slurm`.

A thin argparse layer over the public API, for people (bring the cluster up once, point
sparktui at its cluster.toml, poke at nodes) and for scripts (`status --json`, exit codes:
0 ok, 1 failed or not up, 130 interrupted).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .cluster import down, login_shell, rekey, start_sshd, status, stop_sshd, up
from .config import DEFAULT_STATE_DIR, STATE_ENV
from .runner import TestbedError, set_verbose
from .slurmctl import set_slurm_state, slurm_command, start_slurmd, stop_slurm, stop_slurmd

PROG = "python -m sparktui_testbed"
DESCRIPTION = 'A real local test cluster for sparktui: N "nodes" on this one machine.'


def _print_status(st: dict[str, Any]) -> None:
    print(f"state dir: {st['state_dir']}")
    if "testbed" not in st:
        print(
            "testbed: down" + (f" (leftovers: {', '.join(st['leftovers'])})" if st.get("leftovers") else "")
        )
        return
    tb = st["testbed"]
    print(f"testbed: {'UP' if st['up'] else 'NOT HEALTHY'}   cluster file: {tb['cluster_file']}")
    print(f"image: {tb['image']} {tb['image_id']}   storage driver: {tb['storage_driver']}")
    for node in tb["nodes"]:
        h = st["health"][node["name"]]
        img = "ok" if h["image_id"] == tb["image_id"] else f"WRONG({h['image_id']})"
        print(
            f"  {node['name']:7} {node['ip']:13} sshd={h['sshd_pid'] or 'DOWN'}"
            f"{'' if h['ssh_port_open'] else '(port closed)'}"
            f" dockerd={h['dockerd_pid'] or 'DOWN'}"
            f"{'' if h['docker_ping'] else '(no ping)'} image={img}"
            f" socket={node['docker_socket']}"
        )
    _print_slurm(tb.get("slurm"), st.get("slurm"))


def _print_slurm(s: dict[str, Any] | None, h: dict[str, Any] | None) -> None:
    if not s or not h:
        print("slurm: not started")
        return
    login = s["login"]
    print(
        f"slurm: login {login['ip']} sshd={h['sshd_pid'] or 'DOWN'}"
        f"{'' if h['ssh_port_open'] else '(port closed)'} munged={h['munged_pid'] or 'DOWN'}"
        f" slurmctld={h['slurmctld_pid'] or 'DOWN'}{'' if h['slurmctld_port_open'] else '(port closed)'}"
        f"   partition {s['partition']}   SLURM_CONF={s['conf']}   shared {s['shared']}"
    )
    for name, d in h["slurmd"].items():
        print(
            f"  {name:7} slurmd={d['pid'] or 'DOWN'}{'' if d['port_open'] else '(port closed)'}"
            f" state={d['state'] or '?'}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument(
            "--state", default=None, help=f"state dir (default ${STATE_ENV} or {DEFAULT_STATE_DIR})"
        )
        p.add_argument("-q", "--quiet", action="store_true")
        return p

    p = add("up", "bring the testbed up (reuses a running one)")
    p.add_argument("--nodes", "-n", type=int, default=4)
    p.add_argument("--no-verify", action="store_true", help="skip the post-up checks")
    p = add("down", "stop and remove everything")
    p.add_argument("--purge", action="store_true", help="also drop the image cache")
    p = add("status", "show the testbed's health (exit 1 unless up)")
    p.add_argument("--json", action="store_true")
    for name in ("stop-sshd", "start-sshd"):
        add(name, f"{name.split('-')[0]} a node's sshd").add_argument("node")
    p = add("rekey", "give a node's sshd a new host key (known_hosts unchanged)")
    p.add_argument("node")
    p.add_argument("--restore", action="store_true", help="put the original key back")
    p.add_argument("--update-known-hosts", action="store_true")
    p = add("login-shell", "set root's login shell on one node (no SHELL: the machine's own)")
    p.add_argument("node")
    p.add_argument("shell", nargs="?", default=None)
    p = add("slurm", "run a Slurm client command on the login node (exit: its exit code)")
    p.add_argument("--user", default="root", help="as this unix user (default root)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="CMD ...")
    p = add("stop-slurmd", "kill a node's slurmd (its steps go on)")
    p.add_argument("node")
    p.add_argument("--down", action="store_true", help="then set the node DOWN")
    p.add_argument("--steps", action="store_true", help="also kill its slurmstepds and tasks")
    p.add_argument("--lost", action="store_true",
                   help="SIGKILL it, its steps and its containers at once (a node losing power)")
    add("start-slurmd", "start a node's slurmd and wait until it is in service").add_argument("node")
    p = add("slurm-state", "scontrol update a node's State (DOWN, DRAIN, RESUME, ...)")
    p.add_argument("node")
    p.add_argument("node_state", metavar="STATE")
    p.add_argument("--reason", default="sparktui testbed")
    add("stop-slurm", "take Slurm and the login node off the testbed (up starts them again)")
    args = ap.parse_args(argv)
    set_verbose(not args.quiet)
    try:
        if args.cmd == "up":
            tb = up(args.nodes, args.state, verify=not args.no_verify)
            print(
                f"testbed up ({'reused' if tb.reused else 'created'}): "
                f"{len(tb.nodes)} nodes, state {tb.state_dir}"
            )
            print(f"cluster file: {tb.cluster_file}")
            print(f"timings: {json.dumps(tb.timings)}")
            for node in tb.nodes:
                print(f"  {node.name} ssh root@{node.ip}  docker -H unix://{node.docker_socket}")
            if tb.slurm:
                s = tb.slurm
                print(
                    f"  {s.login.name} ssh root@{s.login.ip} (known_hosts {s.known_hosts})  slurm "
                    f"partition {s.partition}, SLURM_CONF={s.conf}, shared folder {s.shared}, "
                    f"second user {s.second_user}"
                )
        elif args.cmd == "down":
            down(args.state, purge=args.purge)
            print("testbed down")
        elif args.cmd == "status":
            st = status(args.state)
            if args.json:
                print(json.dumps(st, indent=2))
            else:
                _print_status(st)
            return 0 if st["up"] else 1
        elif args.cmd == "stop-sshd":
            stop_sshd(args.state, args.node)
        elif args.cmd == "start-sshd":
            start_sshd(args.state, args.node)
        elif args.cmd == "login-shell":
            login_shell(args.state, args.node, args.shell)
        elif args.cmd == "slurm":
            argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            if not argv:
                ap.error("slurm: give a command, e.g. sinfo")
            cp = slurm_command(args.state, argv, user=args.user)
            sys.stdout.write(cp.stdout)
            sys.stderr.write(cp.stderr)
            return cp.returncode
        elif args.cmd == "stop-slurmd":
            stop_slurmd(args.state, args.node, down=args.down, steps=args.steps, lost=args.lost)
        elif args.cmd == "start-slurmd":
            print(start_slurmd(args.state, args.node))
        elif args.cmd == "slurm-state":
            set_slurm_state(args.state, args.node, args.node_state, args.reason)
        elif args.cmd == "stop-slurm":
            stop_slurm(args.state)
        elif args.cmd == "rekey":
            print(
                rekey(args.state, args.node, restore=args.restore, update_known_hosts=args.update_known_hosts)
            )
    except TestbedError as e:
        print(f"testbed {args.cmd} failed: {e}", file=sys.stderr)
        if args.cmd == "up":
            print(f"state kept for inspection; `{PROG} down` cleans it up", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
