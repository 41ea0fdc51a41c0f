"""Values that travel to a node and reach its shell: staging ``src``/``dst``, ``hf_cache``, the
model, the Docker socket and the NIC names doctor looks up. Every node command is already made
shell-neutral (``nodeshell.login_shell_command``); refusing the characters a shell gives a
meaning to is the second wall, and says which key and line to fix before anything connects.

Spaces and non-ASCII letters stay allowed: a folder such as ``/srv/My Models/é`` is legitimate
and goes through quoted like any other. What is refused never names a real folder, model or
device: quotes, backslash, ``$``, backquote, ``;``, ``|``, ``&``, ``<>``, ``()``, ``{}``,
``[]``, ``*?!#``, control and format characters (tab, newline, bidi controls).
"""

from __future__ import annotations

SAFE_PUNCTUATION = frozenset(" /._-+@%,=:~")
NODE_VALUE_RULE = "letters, digits, spaces and / . _ - + @ % , = : ~"


def unsafe_char(value: str) -> str | None:
    """The first character of ``value`` that is not in the safe set, or None."""
    return next((c for c in value if not (c.isalnum() or c in SAFE_PUNCTUATION)), None)


def unsafe_sentence(value: str) -> str | None:
    """Why ``value`` may not be sent to a node, or None when it may."""
    bad = unsafe_char(value)
    if bad is None:
        return None
    shown = repr(value[:120]) + ("..." if len(value) > 120 else "")
    return (f"{shown} holds {bad!r}, which sparktui never sends to a node (its login shell could "
            f"read it as code): a value that goes to a node may hold only {NODE_VALUE_RULE}")


NIC_VARIABLES = (("NCCL_IB_HCA", "infiniband"), ("NCCL_SOCKET_IFNAME", "net"),
                 ("GLOO_SOCKET_IFNAME", "net"))


def nic_names(env: dict[str, str]) -> list[tuple[str, str, str]]:
    """(variable, device, sysfs folder) for each device NCCL is told to use; ``^`` (exclude)
    lists are skipped."""
    out = []
    for var, sysdir in NIC_VARIABLES:
        value = env.get(var, "")
        if not value or value.startswith("^"):
            continue
        for item in value.lstrip("=").split(","):
            name = item.split(":")[0].strip()
            if name:
                out.append((var, name, sysdir))
    return out
