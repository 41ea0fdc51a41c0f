"""A cluster's kind is any registered runtime, read through its traits, never its name."""

from __future__ import annotations

import pytest

from sparktui.core.cluster import load_cluster_text, local_cluster
from sparktui.core.errors import ClusterError
from sparktui.core.kinds import KINDS, Kind, add_kind, remove_kind

CLUSTER = 'name = "c"\nkind = "{kind}"\nhf_cache = "/hf"\n[[nodes]]\nname = "a"\nhost = "localhost"\n'


def test_an_unknown_kind_is_refused_at_its_line_naming_the_kinds() -> None:
    with pytest.raises(ClusterError) as err:
        load_cluster_text(CLUSTER.format(kind="kubernetes"))
    [problem] = err.value.problems
    assert problem.key == "kind" and problem.line == 2
    assert "'kubernetes' is no runtime: use one of local, slurm, ssh" in problem.message


def test_a_kind_added_to_the_registry_loads_with_its_traits() -> None:
    add_kind(Kind("other", shown="elsewhere", on_this_machine=False, node_shell=False))
    try:
        cluster = load_cluster_text(CLUSTER.format(kind="other").replace('hf_cache = "/hf"\n', ""))
        assert cluster.traits.shown == "elsewhere" and not cluster.traits.node_shell
    finally:
        remove_kind("other")
    assert "other" not in KINDS
    remove_kind("ssh")  # the built-in kinds stay
    assert {"ssh", "local"} <= set(KINDS)


def test_the_built_in_kinds_traits() -> None:
    assert local_cluster(2).traits.on_this_machine and not local_cluster(2).traits.node_shell
    ssh = load_cluster_text(CLUSTER.format(kind="ssh"))
    assert ssh.traits.node_shell and not ssh.traits.on_this_machine and ssh.traits.shown == ""
