"""One reading of a node's memory through its connection (``core.meminfo``)."""

from __future__ import annotations

from sparktui.backend.nodeshell import NodeError, NodeShell
from sparktui.core.meminfo import NodeMemory, memory_argv, parse_memory


async def read_memory(shell: NodeShell, timeout: float = 10.0) -> NodeMemory:
    """The node's memory now; NodeError (with a sentence) when it cannot be read."""
    res = await shell.run(memory_argv(), timeout=timeout)
    try:
        return parse_memory(res.stdout)
    except ValueError as exc:
        why = (res.stderr.strip().splitlines() or [str(exc)])[-1]
        raise NodeError(shell.node.name, f"its memory could not be read: {why}") from exc
