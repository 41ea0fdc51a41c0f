"""What a verb imports: each runs in a new process, as a user's shell runs it, and reports the
modules it loaded. ``--version``, ``--help`` and ``completion`` load neither the recipe models
(pydantic) nor Rich; ``validate``, ``plan`` and ``schema`` load no backend, no docker SDK, no
asyncssh, no Textual (issue 13: the CLI starts at once; bench/cli_start.py has the times)."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.cli import Verb, parser
from tests.conftest import ROOT, SEED

PROBE = """
import json, sys
out, sys.argv[1:] = sys.argv[1], sys.argv[2:]
from sparktui.cli import main
try:
    code = main(sys.argv[1:])  # as a call: it returns (as the program it may end at once)
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""
HEAVY = ("textual", "docker", "asyncssh", "sparktui.backend", "sparktui.ui")
MODELS_AND_RICH = ("pydantic", "rich", "sparktui.core.recipe", "sparktui.core.cluster")


def run_verb(tmp_path: Path, *words: str) -> tuple[int, str, set[str]]:
    """Exit code, stdout and the modules loaded by ``sparktui WORDS`` in a new process."""
    report = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(report), *words], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    found = json.loads(report.read_text())
    return found["code"], proc.stdout, set(found["modules"])


def loaded(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("words", [("--version",), ("--help",), ("completion", "bash"),
                                   ("__complete", "recipes")])
def test_version_help_and_completion_load_only_the_parser(tmp_path: Path, words: tuple[str, ...]) -> None:
    code, out, modules = run_verb(tmp_path, *words)
    assert code == 0
    assert out  # it did its job: a version, the help, a script, recipe names
    assert loaded(modules, HEAVY + MODELS_AND_RICH) == []
    # argparse's width without shutil, the user's folders without platformdirs (plain Linux)
    assert loaded(modules, ("shutil", "platformdirs")) == []


def test_grep_of_an_ended_run_loads_only_what_it_needs(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``sparktui logs --grep`` of an ended run is a race with ``grep`` (bench/grep.py): no
    module it does not use, and none of the ones that were taken off its path come back."""
    from sparktui.core.runstore import RunStore

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    run = RunStore(tmp_path / "state" / "sparktui").create("demo-tp4")
    run.event("up")
    run.log(0).append([("2026-01-01T00:00:00.000000000Z", "served_model x")])
    run.event("down", kept=[])
    code, out, modules = run_verb(tmp_path, "logs", "demo-tp4", "--grep", "served")
    assert code == 0
    assert "served_model x" in out
    assert loaded(modules, ("sparktui.backend",)) == ["sparktui.backend", "sparktui.backend.grepwork"]
    assert loaded(modules, ("textual", "docker", "asyncssh", "sparktui.ui", *MODELS_AND_RICH,
                            "typing", "threading", "dataclasses", "datetime", "shutil",
                            "platformdirs", "tomllib", "hashlib", "importlib.resources")) == []


@pytest.mark.parametrize("columns", [None, "", "50", "200", "0", "-3", "wide"])
def test_help_is_as_wide_as_shutil_says(monkeypatch: pytest.MonkeyPatch, columns: str | None) -> None:
    import shutil

    from sparktui.cli import _columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _columns() == shutil.get_terminal_size().columns


@pytest.mark.parametrize("words", [("validate", str(SEED)), ("plan", str(SEED)),
                                   ("plan", str(SEED), "--json"), ("schema",)])
def test_recipe_verbs_load_no_backend(tmp_path: Path, words: tuple[str, ...]) -> None:
    code, out, modules = run_verb(tmp_path, *words)
    assert code == 0
    assert "dsv41" in out or '"$schema"' in out or "valid for cluster" in out
    assert loaded(modules, HEAVY) == []


def test_a_bad_recipe_is_still_one_sentence_without_the_backend(tmp_path: Path) -> None:
    code, _out, modules = run_verb(tmp_path, "plan", str(tmp_path / "missing"))
    assert code == 2
    assert loaded(modules, HEAVY) == []


def _verbs(ap: argparse.ArgumentParser) -> dict[str, object]:
    found: dict[str, object] = {}
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.get_default("func") is not None:
                    found[name] = sub.get_default("func")
                found.update({f"{name} {k}": v for k, v in _verbs(sub).items()})
    return found


def test_every_verb_names_a_handler_that_exists() -> None:
    verbs = _verbs(parser())
    assert {"validate", "plan", "status", "logs", "up", "down", "watch", "image sync",
            "completion", "schema"} <= set(verbs)
    for name, func in verbs.items():
        if isinstance(func, Verb):
            handler = getattr(importlib.import_module(f"sparktui.cli.{func.module}"), func.function)
            assert callable(handler), name


def test_a_bad_sample_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from sparktui.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["stage", "demo-tp4", "--sample", "x"])
    assert exc.value.code == 2
    assert "--sample: 'x' is neither a count of windows nor 'all'" in capsys.readouterr().err


@pytest.mark.parametrize("words", [
    ("logs", "demo-tp4", "--grep", "x", "-t"),
    ("--cluster", "c.toml", "up", "demo-tp4", "--wait", "--launch-order", "head-first"),
    ("--theme", "plan", "validate", "a", "b"),  # "plan" is the theme here, validate the verb
    ("--recipes=r", "restart", "demo-tp4", "--group"),
    ("image", "sync", "demo-tp4", "--from", "local"),
    ("stage", "demo-tp4", "--sample", "all", "--json"),
    ("completion", "fish"),
])
def test_the_parser_of_one_verb_reads_what_the_whole_parser_reads(words: tuple[str, ...]) -> None:
    from sparktui.cli import verb_of

    verb = verb_of(words)
    assert verb is not None and verb != "plan"
    one, whole = parser(verb).parse_args(words), parser().parse_args(words)
    assert vars(one).keys() == vars(whole).keys()
    for key in vars(whole):
        if key != "func":  # a Verb each time, equal by what it names
            assert getattr(one, key) == getattr(whole, key), key
    assert parser(verb)._subparsers is not None
    assert list(parser(verb)._subparsers._group_actions[0].choices) == [verb]


@pytest.mark.parametrize("words", [(), ("--help",), ("--cluster", "x", "--he"), ("nosuchverb",),
                                   ("--theme", "logs")])
def test_no_verb_or_top_level_help_builds_every_verb(words: tuple[str, ...]) -> None:
    from sparktui.cli import verb_of

    assert verb_of(words) is None


def test_an_unknown_verb_is_still_told_with_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    from sparktui.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["lgos", "demo-tp4"])
    assert exc.value.code == 2
    assert "invalid choice: 'lgos'" in capsys.readouterr().err
