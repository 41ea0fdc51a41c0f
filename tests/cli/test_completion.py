"""Shell completion, driven in a real bash: verbs, options and recipe names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.cli import parser
from sparktui.cli.completion import recipe_names, script
from tests.conftest import ROOT

BIN = str(Path(sys.executable).parent)  # where the sparktui entry point is installed


def bash_complete(*words: str, recipes: Path | None = None) -> list[str]:
    """What bash offers for ``words`` (the last one is being typed)."""
    source = subprocess.run([sys.executable, "-m", "sparktui", "completion", "bash"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    quoted = " ".join(f"'{w}'" for w in words)
    probe = source + f"""
COMP_WORDS=({quoted}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _sparktui
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    if recipes is not None:
        env["SPARKTUI_RECIPES"] = str(recipes)
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    return [w for w in out.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_bash_completes_verbs_options_and_recipes(tmp_path: Path) -> None:
    assert bash_complete("sparktui", "pl") == ["plan"]
    assert set(bash_complete("sparktui", "re")) == {"restart"}
    assert bash_complete("sparktui", "up", "--wa") == ["--wait"]
    assert "--group" in bash_complete("sparktui", "restart", "demo-tp4", "--")
    folder = tmp_path / "recipes"
    (folder / "alpha-tp2").mkdir(parents=True)
    (folder / "alpha-tp2" / "recipe.toml").write_text("")
    (folder / "beta.recipe.toml").write_text("")
    offered = bash_complete("sparktui", "plan", "", recipes=folder)
    assert offered[:2] == ["alpha-tp2", "beta"]  # $SPARKTUI_RECIPES comes first
    assert "demo-tp4" in offered  # the shipped ones follow
    assert bash_complete("sparktui", "plan", "al", recipes=folder) == ["alpha-tp2"]
    # a verb with verbs of its own: the verb, then its options and recipes
    assert bash_complete("sparktui", "image", "") == ["sync"]
    assert bash_complete("sparktui", "image", "sy") == ["sync"]
    assert bash_complete("sparktui", "image", "sync", "--fr") == ["--from"]
    assert bash_complete("sparktui", "image", "sync", "al", recipes=folder) == ["alpha-tp2"]
    # a value after --cluster is a file, not the verb
    assert bash_complete("sparktui", "--cluster", "x.toml", "plan", "al", recipes=folder) == ["alpha-tp2"]


def test_every_verb_and_shell_is_covered() -> None:
    ap = parser()
    for shell in ("bash", "zsh", "fish"):
        text = script(shell, ap)
        for verb in ("plan", "up", "logs", "restart", "watch", "status", "completion", "sync"):
            assert verb in text, (shell, verb)
    assert script("zsh", ap).startswith("autoload -U +X bashcompinit")


def test_recipe_names_lists_without_loading(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "recipe.toml").write_text("not toml at all [[[")
    (tmp_path / "b.recipe.toml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert recipe_names([tmp_path, tmp_path / "missing"]) == ["a", "b"]
