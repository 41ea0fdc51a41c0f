"""Input limits, duplicate keys and safe names: broken or hostile files answer with a sentence
naming the line (and the key), fast."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sparktui.core.cluster import load_cluster_text
from sparktui.core.errors import ConfigError
from sparktui.core.names import UnsafeName, check_name, child
from sparktui.core.runstore import RunStore
from sparktui.core.tomlsource import parse_toml, read_toml


def problem(text: str) -> str:
    with pytest.raises(ConfigError) as err:
        parse_toml(text)
    (only,) = err.value.problems
    return str(only)


@pytest.mark.parametrize(("text", "said"), [
    ("a = 1\na = 2\n", "<recipe>:2:1: error: a: set twice, on line 1 and again on line 2"),
    ("[t]\nx = 1\n[t]\n", "<recipe>:3:1: error: t: set twice, on line 1 and again on line 3"),
    ("[env]\nK = '1'\n\"K\" = '2'\n", "<recipe>:3:1: error: env.K: set twice, on line 2 and again on line 3"),
    ("e = {a = 1, a = 2}\n", "error: e.a: set twice, on line 1 and again on line 1"),
    ("[t]\nx = 1\n\n[t.x]\n", "error: t.x: set twice, on line 2 and again on line 4"),
    ("a = 1\na.b = 2\n", "error: a: set twice, on line 1 and again on line 2"),
])
def test_duplicate_keys_name_the_key_and_both_lines(text: str, said: str) -> None:
    assert said in problem(text)


def test_limits_answer_with_a_line() -> None:
    assert problem("a = " + "[" * 3000 + "]" * 3000).startswith("<recipe>:1: error: nested more than 16")
    assert problem("x = 1\na = " + "9" * 5000).startswith("<recipe>:2: error: a number sparktui cannot read")
    assert "a: a string of 70,000 characters" in problem('a = "' + "x" * 70_000 + '"')
    assert "args: 20,000 entries" in problem("args = [" + "1," * 20_000 + "]")
    assert "<recipe>:3:1: error: t.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p: nested more than" in problem(
        "x = 1\n\n[t]\n" + ".".join("bcdefghijklmnopqr") + " = 1\n")
    assert parse_toml("\ufeffa = 1\n").data == {"a": 1}  # a byte order mark is not an error


@pytest.mark.parametrize("deep", [
    "[" + ".".join(["t"] * 1000) + "]\nx = 1\n",  # a table header: no bracket nests
    ".".join(["t"] * 1000) + " = 1\n",               # a dotted key
    "[[" + ".".join(["t"] * 1000) + "]]\n",         # an array of tables
], ids=["header", "dotted-key", "array-of-tables"])
def test_a_1000_deep_table_is_refused_at_its_line(deep: str) -> None:
    said = problem("x = 1\n\n" + deep)
    assert said.startswith("<recipe>:3:1: error: t.t.t.t.t.t.t.t.t.t.t.t.t.t.t.t: nested more "
                           "than 16 levels deep"), said


def test_files_that_are_no_recipe(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(ConfigError, match="not a regular file"):
        read_toml(fifo)  # would block forever if opened
    assert time.monotonic() - started < 1
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"a = 1\nb = '\xff'\n")
    with pytest.raises(ConfigError, match=r"bad.toml:2: error: not UTF-8 text \(byte 11\)"):
        read_toml(bad)


def test_cluster_paths_are_absolute() -> None:
    nodes = '[[nodes]]\nname = "a"\nhost = "a.lan"\n'
    with pytest.raises(ConfigError) as err:
        load_cluster_text(f'name = "c"\nhf_cache = "~/.cache/huggingface"\n{nodes}')
    assert "2:1: error: hf_cache: '~/.cache/huggingface' must be an absolute path: ~ is not " \
           "expanded on the nodes" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_cluster_text(f'name = "c"\n{nodes}')
    assert "hf_cache: missing for a: set hf_cache to the nodes' Hugging Face cache folder" in str(err.value)
    with pytest.raises(ConfigError, match="name: String should match pattern"):
        load_cluster_text(f'name = "../x"\nhf_cache = "/hf"\n{nodes}')
    for host, said in (("a:0", "port 0 is not a TCP port"), ("-oProxyCommand=x", "is not a host name"),
                       ("[::1]:70000", "port 70000 is not a TCP port"), ("a:b", "port -1 is not")):
        with pytest.raises(ConfigError, match="nodes\\[0\\].host: .*" + said.replace("[", "\\[")):
            load_cluster_text(f'name = "c"\nhf_cache = "/hf"\n[[nodes]]\nname = "a"\nhost = "{host}"\n')


def test_names_that_become_paths(tmp_path: Path) -> None:
    for bad in ("../../x", "/tmp/x", "", ".", "..", "a/b", "~", "x\n", "a" * 200, "-rf"):
        with pytest.raises(UnsafeName):
            check_name(bad, "run id")
    assert check_name("demo-tp4-20250101-120000-2", "run id")
    store = RunStore(tmp_path)
    for bad in ("../../x", "/tmp/x"):
        with pytest.raises(UnsafeName, match="run id"):
            store.open(bad)
    run = store.create("demo")
    (store.root / "demo-99999999-000000").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(UnsafeName, match="leads outside"):
        store.open("demo-99999999-000000")
    assert store.latest("demo") is not None and store.latest("demo").id == run.id  # the link is skipped
    with pytest.raises(UnsafeName):
        child(tmp_path, "x/../../y", "name")


def test_node_paths_in_a_recipe_are_absolute() -> None:
    from sparktui.core.cluster import local_cluster
    from sparktui.core.lints import lint
    from sparktui.core.recipe import load_recipe_text

    recipe = load_recipe_text(
        'engine = "sglang"\ndocker_image = "i"\nmodel = "m"\nrequired_nodes = 1\n'
        'tensor_parallel_size = 1\n[[staging]]\nkind = "sparse-rows"\nid = "e"\n'
        'src = "{{hf}}/hub/x"\ndst = "~/engram"\n[[extra_mounts]]\nhost = "data"\ncontainer = "/d"\n')
    found = {p.key: p for p in lint(recipe, local_cluster(1)) if p.code == "node-path"}
    assert set(found) == {"staging[0].dst", "extra_mounts[0].host"}
    assert str(found["staging[0].dst"]).startswith(
        "<recipe>:10:1: error: staging[0].dst: '~/engram' must be an absolute path: ~ is not "
        "expanded on the nodes")
    assert "a relative path has no fixed meaning on a node" in found["extra_mounts[0].host"].message
