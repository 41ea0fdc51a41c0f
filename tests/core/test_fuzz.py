"""Whatever an operator's editor produces, loading gives a recipe or the project's error.

Two kinds: hypothesis mutates the parsed data of the seed recipe; the mutation fuzz below
mutates the bytes of every shipped recipe and of a cluster file (lines deleted, duplicated and
swapped, values of another type, random unicode, NUL, invalid UTF-8, a BOM, CRLF, truncation,
deep nesting, huge numbers, unknown keys, placeholders, markup) and sends each mutant through
``sparktui validate`` and ``sparktui plan --json`` in-process with a time limit: no exception
escapes, nothing hangs, and every rejection names a line or a key. CI runs ``FUZZ_CI`` mutants;
``SPARKTUI_FUZZ_EXAMPLES=50000`` runs more by hand (``SPARKTUI_FUZZ_SEED`` picks another
sequence); docs/benchmarks.md records such a run.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import io
import multiprocessing
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.cli import main
from sparktui.core.cluster import load_cluster, local_cluster
from sparktui.core.errors import ConfigError, RecipeError
from sparktui.core.lints import lint
from sparktui.core.plan import build_plan
from sparktui.core.recipe import Recipe, load_recipe, load_recipe_text, recipe_from_source
from sparktui.core.tomlsource import TomlSource
from tests.conftest import CLUSTER4, RECIPES, SEED

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SEED_TEXT = SEED.read_text()
SEED_DATA = tomllib.loads(SEED_TEXT)

Path_ = tuple[Any, ...]


def paths(data: Any, prefix: Path_ = ()) -> list[Path_]:
    out: list[Path_] = []
    if isinstance(data, dict):
        for k, v in data.items():
            out.append((*prefix, k))
            out += paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append((*prefix, i))
            out += paths(v, (*prefix, i))
    return out


ALL_PATHS = paths(SEED_DATA)

tricky_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["{{", "}}", "{{rank}}", "{{nope}}", "re:(", "re:[", "...", "55Q", "-1",
                     "1e999", "all", "any", "--port", "--model-path", "sglang", "vllm", "20x",
                     "\x00", "ℵ", "re:^x$", "{{ hf }}", "0"]),
)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), tricky_text),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(tricky_text, children, max_size=3)),
    max_leaves=6,
)


def parent_and_key(data: Any, path: Path_) -> tuple[Any, Any]:
    node = data
    for comp in path[:-1]:
        node = node[comp]
    return node, path[-1]


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(SEED_DATA)
    for _ in range(draw(st.integers(1, 4))):
        live = paths(data)
        if not live:
            break
        path = draw(st.sampled_from(live))
        parent, key = parent_and_key(data, path)
        action = draw(st.sampled_from(["drop", "retype", "rename", "string"]))
        if action == "drop":
            del parent[key]
        elif action == "retype":
            parent[key] = draw(values)
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(tricky_text)] = parent.pop(key)
        elif action == "string":
            parent[key] = draw(tricky_text)
    return data


def check(recipe: Recipe) -> None:
    """A recipe that loads must also lint and plan without surprises."""
    found = lint(recipe, local_cluster(recipe.spec.required_nodes))
    if not [p for p in found if p.severity == "error"] and recipe.spec.required_nodes <= 16:
        build_plan(recipe, local_cluster(recipe.spec.required_nodes))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_data_loads_or_raises_recipe_error(data: dict[str, Any]) -> None:
    source = TomlSource(data=data, text=SEED_TEXT, path=SEED)
    try:
        recipe = recipe_from_source(source)
    except RecipeError as exc:
        assert exc.problems and all(p.message for p in exc.problems)
        return
    check(recipe)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(SEED_TEXT)), st.integers(0, 40), tricky_text)
def test_mutated_text_loads_or_raises_recipe_error(at: int, cut: int, insert: str) -> None:
    text = SEED_TEXT[:at] + insert + SEED_TEXT[at + cut:]
    try:
        recipe = load_recipe_text(text, SEED)
    except RecipeError as exc:
        assert exc.problems
        return
    check(recipe)


def test_known_paths_cover_the_seed() -> None:
    assert ("staging", 0, "min_free") in ALL_PATHS
    assert ("boot", "must_show", 3, "ranks") in ALL_PATHS


# -- the mutation fuzz ----------------------------------------------------------------------

FUZZ_CI = 2400
"""Mutants per CI run (the issue asks at least 2,000; about 25 s on one core)."""
TIME_LIMIT_S = 5.0
"""A mutant that takes longer through validate and plan has hung: the test fails."""
SHIPPED = sorted(RECIPES.glob("*/recipe.toml"))
WORDS = ["[/red]", "[/]", "[link=http://x]", "[INST]", "\x1b[31m", "{{nope}}", "{{rank}}",
         "{{ hf }}", "{{", "}}", "~/x", "../../x", "-P", "re:(", "...", "\u202e", "ℵ", "🦀", "\\"]
VALUES = ["1", "-1", "0", "true", "3.5", "nan", "inf", "-inf", '"x"', "''", "[]", "{}", "[1, 2]",
          '["a", 1]', "{ a = 1 }", "1979-05-27T07:32:00Z", "99999999999999999999",
          "1" + "0" * 400, "-" + "9" * 30, "1e999", '"' + "9" * 400 + 'G"', '"' + "9" * 40 + 'm"',
          "0x7fffffffffffffff", '"~/.cache/huggingface"', '"relative/path"', '"{{nope}}"',
          '"[/red] [/] [link=http://x]"']


class Hung(BaseException):
    """Raised by the alarm in a mutant that took too long (a BaseException: no ``except
    Exception`` in the code under test can swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def hung(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"no answer within {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutation of a TOML file's bytes, and its name."""
    lines = _lines(data)
    kind = rng.choice(["delete", "duplicate", "swap", "retype", "unicode", "nul", "utf8", "bom",
                       "crlf", "truncate", "nest", "huge", "unknown", "placeholder", "word"])
    i = rng.randrange(len(lines))
    if kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind in ("retype", "huge", "nest"):
        keyed = [k for k, line in enumerate(lines) if b"=" in line and not line.lstrip().startswith(b"#")]
        k = rng.choice(keyed) if keyed else i
        key = lines[k].split(b"=", 1)[0] if b"=" in lines[k] else b"x "
        if kind == "retype":
            value = rng.choice(VALUES).encode()
        elif kind == "huge":
            value = rng.choice([b"9" * rng.randint(20, 6000), b"-" + b"9" * 5000, b"1e999",
                                b"1" + b"0" * 4301, b'"' + b"9" * 5000 + b'G"'])
        else:
            depth = rng.choice([3, 17, 100, 1000, 5000])
            value = (b"[" * depth + b"1" + b"]" * depth) if rng.random() < 0.5 else \
                (b"{a=" * depth + b"1" + b"}" * depth)
        lines[k] = key + b"= " + value
    elif kind == "unicode":
        at = rng.randrange(len(data) + 1)
        chars = "".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff),
                                        rng.randint(0x1f300, 0x1faff), 0x202e, 0xfeff]))
                        for _ in range(rng.randint(1, 8)))
        return data[:at] + chars.encode() + data[at:], kind
    elif kind == "nul":
        at = rng.randrange(len(data) + 1)
        return data[:at] + b"\x00" + data[at:], kind
    elif kind == "utf8":
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"]) + data[at:], kind
    elif kind == "bom":
        return b"\xef\xbb\xbf" + data, kind
    elif kind == "crlf":
        return data.replace(b"\n", b"\r\n"), kind
    elif kind == "truncate":
        return data[:rng.randrange(len(data) + 1)], kind
    elif kind == "unknown":
        lines.insert(i, rng.choice([b"unknown_key = 1", b"nmae = 'x'", b"[extra]", b"[[nodes]]",
                                    b"env.NEW = 'v'", b"[boot.extra]", b"sshh.user = 'x'"]))
    else:  # placeholder, word: into a string value
        quoted = [k for k, line in enumerate(lines) if b'"' in line]
        k = rng.choice(quoted) if quoted else i
        word = rng.choice(WORDS if kind == "word" else WORDS[5:10]).encode()
        at = lines[k].find(b'"') + 1
        lines[k] = lines[k][:at] + word + lines[k][at:]
    return b"\n".join(lines), kind


def _rejections_name_a_line_or_key(recipe_path: Path, cluster_path: Path) -> None:
    """Load as validate and plan do; every problem of a rejection names a line or a key."""
    try:
        recipe = load_recipe(recipe_path)
        found = lint(recipe, load_cluster(cluster_path))  # the plan itself: sparktui plan did it
    except ConfigError as exc:
        found = exc.problems
    for p in found:
        assert p.line is not None or p.key, f"a problem naming neither a line nor a key: {p}"


def run_mutants(count: int, seed: int, tmp: Path, on_each: Callable[[int], None] | None = None) -> dict[str, int]:
    """``count`` mutants through validate and plan; returns how many of each kind of mutation
    ran and how each verb answered. Any escape, hang or unnamed rejection fails at once,
    naming the mutant (its bytes are kept in ``tmp``)."""
    rng = random.Random(seed)
    cluster_bytes = CLUSTER4.read_bytes()
    shipped = [(p.parent.name, p.read_bytes()) for p in SHIPPED]
    seed_bytes = SEED.read_bytes()
    stats: dict[str, int] = {}
    folder = tmp / "mutant"
    folder.mkdir(exist_ok=True)
    recipe_path, cluster_path = folder / "recipe.toml", tmp / "cluster.toml"
    for n in range(count):
        if rng.random() < 0.25:  # the cluster file mutates; the seed recipe needs its 4 nodes
            recipe_data, (cluster_data, kinds) = seed_bytes, _mutations(cluster_bytes, rng)
            target = "cluster"
        else:
            _name, original = rng.choice(shipped)
            (recipe_data, kinds), cluster_data = _mutations(original, rng), cluster_bytes
            target = "recipe"
        recipe_path.write_bytes(recipe_data)
        cluster_path.write_bytes(cluster_data)
        where = f"mutant {n} (seed {seed}, {target}: {'+'.join(kinds)}; kept in {tmp})"
        started = time.monotonic()
        try:
            with time_limit(TIME_LIMIT_S), contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                codes = (main(["validate", str(folder), "--cluster", str(cluster_path)]),
                         main(["plan", str(folder), "--cluster", str(cluster_path), "--json"]))
                _rejections_name_a_line_or_key(recipe_path, cluster_path)
        except (Hung, Exception) as exc:
            raise AssertionError(f"{where}: {type(exc).__name__}: {exc}") from exc
        took = time.monotonic() - started
        assert codes[0] in (0, 1) and codes[1] in (0, 2), f"{where}: exit codes {codes}"
        assert took < TIME_LIMIT_S, f"{where}: {took:.1f} s"
        for kind in kinds:
            stats[kind] = stats.get(kind, 0) + 1
        stats[f"validate exit {codes[0]}"] = stats.get(f"validate exit {codes[0]}", 0) + 1
        stats[f"plan exit {codes[1]}"] = stats.get(f"plan exit {codes[1]}", 0) + 1
        if on_each is not None:
            on_each(n)
    return stats


def _mutations(data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    kinds = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        data, kind = mutate(data, rng)
        kinds.append(kind)
    return data, kinds


def _worker(count: int, seed: int, tmp: str) -> dict[str, int]:
    Path(tmp).mkdir(exist_ok=True)
    return run_mutants(count, seed, Path(tmp))


def test_mutated_files_through_validate_and_plan(tmp_path: Path) -> None:
    """Split over two processes (the CI machine has two cores): about 20 s for 2,400."""
    count = int(os.environ.get("SPARKTUI_FUZZ_EXAMPLES", FUZZ_CI))
    seed = int(os.environ.get("SPARKTUI_FUZZ_SEED", "14"))
    workers = max(2, min(8, os.cpu_count() or 2))
    started = time.monotonic()
    shares = [count // workers + (1 if k < count % workers else 0) for k in range(workers)]
    context = multiprocessing.get_context("fork")  # the test's isolated XDG folders go along
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        results = list(pool.map(_worker, shares, [seed * 100 + k for k in range(workers)],
                                [str(tmp_path / f"w{k}") for k in range(workers)]))
    stats: dict[str, int] = {}
    for part in results:
        for key, value in part.items():
            stats[key] = stats.get(key, 0) + value
    took = time.monotonic() - started
    assert sum(v for k, v in stats.items() if k.startswith("plan exit")) == count >= 2000 or \
        "SPARKTUI_FUZZ_EXAMPLES" in os.environ
    for kind in ("delete", "duplicate", "swap", "retype", "unicode", "nul", "utf8", "bom", "crlf",
                 "truncate", "nest", "huge", "unknown", "placeholder", "word"):
        assert stats.get(kind, 0) > 0, f"no {kind} mutation ran: {stats}"
    assert stats.get("plan exit 0", 0) > 0 and stats.get("plan exit 2", 0) > 0  # both outcomes
    print(f"\nfuzz: {count} mutants (seeds {seed}00-{seed}{workers - 1:02d}) in {took:.1f} s on "
          f"{workers} processes, zero escapes: "
          + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
