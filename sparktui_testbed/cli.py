"""The command line: `python -m sparktui_testbed up|down|status|stop-sshd|start-sshd|rekey|login-shell`.

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
