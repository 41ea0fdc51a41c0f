"""The nodes' network: one bridge in the root namespace, one netns + veth per node.

Nodes talk to each other and to the host over sptb-br0 (10.250.0.0/24) like hosts on a LAN.
Where Docker already runs on the machine, br_netfilter sends bridged frames through the
iptables FORWARD chain (policy DROP), so a tagged ACCEPT rule is added for our bridge and
removed on teardown. leftovers() finds what a crashed run left behind, by name.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .config import (
    BRIDGE,
    BRIDGE_IP,
    DAEMON_PATH,
    LOGIN_NETNS,
    LOGIN_VETH,
    NETNS_RE,
    PREFIX_LEN,
    SUBNET_PREFIX,
    VETH_RE,
)
from .layout import Node
from .runner import TestbedError, daemon_env, run, step


def links() -> list[str]:
    """The network devices of this process's namespace. Not /sys/class/net: sysfs shows the
    namespace of whoever mounted it, so under ``unshare -n`` it names the host's devices, and a
    bridge made in our namespace looks absent (a second ``up`` in the same run then refused to
    make it again, its subnet already routed)."""
    text = Path("/proc/self/net/dev").read_text()
    return [line.split(":", 1)[0].strip() for line in text.splitlines()[2:] if ":" in line]


def link_exists(name: str) -> bool:
    return name in links()


def setup_bridge() -> None:
    with step(None, f"create bridge {BRIDGE}"):
        if not link_exists(BRIDGE):
            cp = run(
                ["ip", "-4", "route", "show", f"{SUBNET_PREFIX}0/{PREFIX_LEN}"], what="ip route", check=False
            )
            if cp.stdout.strip():
                raise TestbedError(
                    f"{SUBNET_PREFIX}0/{PREFIX_LEN} is already routed here: {cp.stdout.decode().strip()}"
                )
            run(["ip", "link", "add", BRIDGE, "type", "bridge"], what="ip link add")
        write_sysctl(f"net/ipv6/conf/{BRIDGE}/disable_ipv6", "1")
        cp = run(["ip", "-4", "addr", "show", "dev", BRIDGE], what="ip addr")
        if f"{BRIDGE_IP}/{PREFIX_LEN}" not in cp.stdout.decode():
            run(["ip", "addr", "add", f"{BRIDGE_IP}/{PREFIX_LEN}", "dev", BRIDGE], what="ip addr add")
        run(["ip", "link", "set", BRIDGE, "up"], what="ip link set up")
        _allow_bridged_forwarding()


_FORWARD_RULE = [
    "FORWARD",
    "-i",
    BRIDGE,
    "-o",
    BRIDGE,
    "-j",
    "ACCEPT",
    "-m",
    "comment",
    "--comment",
    "sparktui-testbed",
]


def _allow_bridged_forwarding() -> None:
    """With br_netfilter loaded, node-to-node frames cross iptables' FORWARD chain, whose
    policy is DROP on machines running Docker: accept our bridge's own traffic there."""
    try:
        on = Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"
    except OSError:
        on = False
    ipt = shutil.which("iptables", path=DAEMON_PATH)
    if not on or not ipt:
        return
    if run([ipt, "-w", "5", "-C", *_FORWARD_RULE], what="iptables", check=False).returncode:
        run([ipt, "-w", "5", "-I", *_FORWARD_RULE], what="iptables -I FORWARD", check=False)


def remove_forward_rule() -> None:
    ipt = shutil.which("iptables", path=DAEMON_PATH)
    for _ in range(10):
        if not ipt or run([ipt, "-w", "5", "-D", *_FORWARD_RULE], what="iptables", check=False).returncode:
            break


def write_sysctl(key: str, value: str) -> None:
    with contextlib.suppress(OSError):
        Path("/proc/sys", key).write_text(value)


def mac_of(ip: str) -> str:
    """A node's eth0 address, fixed by its IP (locally administered): a namespace made again
    (the login node's, when Slurm restarts) answers with the MAC the neighbours cached."""
    return "02:00:" + ":".join(f"{int(octet):02x}" for octet in ip.split("."))


def forget_neighbour(ip: str, netns: Sequence[str] = ()) -> None:
    """Drop the cached MAC of ``ip`` on the bridge and in these namespaces (a testbed of an
    earlier version gave a namespace made again a new random MAC)."""
    run(["ip", "neigh", "del", ip, "dev", BRIDGE], what="ip neigh del", check=False)
    for ns in netns:
        run(["ip", "-n", ns, "neigh", "del", ip, "dev", "eth0"], what="ip neigh del", check=False)


def setup_netns(node: Node) -> None:
    veth = node.veth
    with step(node.name, "network namespace"):
        run(["ip", "netns", "add", node.netns], what="ip netns add")
        run(
            ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", node.netns,
             "address", mac_of(node.ip)],
            what="ip link add veth",
        )
        write_sysctl(f"net/ipv6/conf/{veth}/disable_ipv6", "1")
        batch = (
            "\n".join(
                [
                    "link set lo up",
                    f"addr add {node.ip}/{PREFIX_LEN} dev eth0",
                    "link set eth0 up",
                ]
            )
            + "\n"
        )
        run(["ip", "-n", node.netns, "-batch", "-"], what="ip -n batch", input=batch.encode())
        run(["ip", "link", "set", veth, "master", BRIDGE, "up"], what="ip link set master")
        # as on a real host (also silences docker's "IPv4 forwarding is disabled" warning)
        run(
            [
                "nsenter",
                f"--net={node.netns_path}",
                "sh",
                "-c",
                "echo 1 > /proc/sys/net/ipv4/ip_forward; echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6",
            ],
            what="netns sysctls",
        )


def leftovers() -> list[str]:
    found = []
    cp = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10, env=daemon_env())
    for line in cp.stdout.decode().splitlines():
        name = line.split()[0] if line.split() else ""
        if NETNS_RE.match(name) or name == LOGIN_NETNS:
            found.append(f"netns {name}")
    for dev in sorted(links()):
        if dev in (BRIDGE, LOGIN_VETH) or VETH_RE.match(dev):
            found.append(f"link {dev}")
    return found
