"""A node whose kernel messages cannot be read (``kernel.dmesg_restrict=1``, a user without
CAP_SYSLOG nor the journal's groups) gives a sentence naming the node and what to do, in the
rank's verdict and in ``doctor``, never a traceback: this machine as the node, the fixed script
run by an unprivileged user (``setpriv``), dmesg and journalctl themselves answering."""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

import pytest

from sparktui.backend.kmsg import doctor_findings, read_kernel
from sparktui.backend.nodeshell import CommandResult, LocalShell, NodeError
from sparktui.core.cluster import local_cluster

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None
    or Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() != "1",
    reason="needs root, setpriv and kernel.dmesg_restrict=1 (as the test machine has)")


class Unprivileged(LocalShell):
    """This machine reached as the user ``nobody``: every command runs with its uid, no groups."""

    async def run(self, argv: list[str], timeout: float = 30.0) -> CommandResult:
        user = pwd.getpwnam("nobody")
        return await super().run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                                  "--clear-groups", *argv], timeout)


async def test_no_permission_is_a_sentence_naming_the_node_and_what_to_do() -> None:
    node = local_cluster(1).nodes[0]
    with pytest.raises(NodeError) as caught:
        await read_kernel(Unprivileged(node))
    said = str(caught.value)
    assert said.startswith(f"{node.name}: its kernel messages cannot be read (denied dmesg: "), said
    assert "Operation not permitted" in said and "dmesg_restrict" in said and "\n" not in said
    lines = await doctor_findings(Unprivileged(node))
    assert [(f.node, f.check, f.verdict) for f in lines] == [(node.name, "kernel", "warned")]
    assert lines[0].sentence == caught.value.reason
    root = await doctor_findings(LocalShell(node))  # root reads them: passed, or what it found
    assert root and all(f.check == "kernel" for f in root)
    assert (root[0].verdict == "passed" and "(dmesg)" in root[0].sentence) or \
        "kernel message(s) that matter in the last hour (dmesg)" in root[0].sentence, root
