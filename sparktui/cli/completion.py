"""Shell completion: ``sparktui completion bash|zsh|fish`` prints a script that completes verbs,
their options and recipe names.

Verbs and options are written into the script from the argparse parser, so they never drift
from the CLI; recipe names are asked for at completion time (``sparktui __complete recipes``),
which lists the recipes folders without loading any recipe.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

SHELLS = ("bash", "zsh", "fish")
HIDDEN = "__complete"
PATH_OPTIONS = ("--cluster", "--recipes", "--output")  # complete file names after these
VALUE_OPTIONS = ("--theme", "--rank", "--grep", "--since", "--max-tokens", "--sample",
                 "--launch-order", "--from", "--run", "--max-log-mb", "--n",
                 "--concurrency")  # take a value that is not completed


def recipe_names(dirs: list[Path]) -> list[str]:
    """Recipe names in ``dirs`` (``<name>/recipe.toml`` and ``<name>.recipe.toml``), first
    folder first, each name once: no recipe is parsed."""
    names: list[str] = []
    for folder in dirs:
        try:
            children = sorted(folder.iterdir())
        except OSError:
            continue
        for child in children:
            if child.is_dir() and (child / "recipe.toml").is_file():
                name = child.name
            elif child.is_file() and child.name.endswith(".recipe.toml"):
                name = child.name[: -len(".recipe.toml")]
            else:
                continue
            if name not in names:
                names.append(name)
    return names


def complete(argv: list[str]) -> int:
    """``sparktui __complete recipes``: one recipe name per line."""
    if argv[:1] == ["recipes"]:
        from sparktui.config import recipes_dirs

        recipes = None
        if "--recipes" in argv:
            i = argv.index("--recipes")
            recipes = Path(argv[i + 1]) if i + 1 < len(argv) else None
        for name in recipe_names(recipes_dirs(recipes)):
            print(name)
    return 0


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def _verbs(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Each verb with its options (global options under ""); a verb with verbs of its own
    (``image sync``) is listed as both words."""
    out: dict[str, list[str]] = {"": _options(parser)}
    for name, sub in _subparsers(parser).items():
        out[name] = _options(sub)
        for inner, subsub in _subparsers(sub).items():
            out[f"{name} {inner}"] = _options(subsub)
    return out


def _nested(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Verbs that take a verb: ``{"image": ["sync"]}``."""
    return {name: list(_subparsers(sub)) for name, sub in _subparsers(parser).items()
            if _subparsers(sub)}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")})


def _takes_recipe(parser: argparse.ArgumentParser) -> set[str]:
    verbs: set[str] = set()
    for name, sub in _subparsers(parser).items():
        if any(a.dest == "recipe" for a in sub._actions):
            verbs.add(name)
        verbs |= {f"{name} {inner}" for inner in _takes_recipe(sub)}
    return verbs


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    verbs = _verbs(parser)
    with_recipe = _takes_recipe(parser)
    nested = _nested(parser)
    if shell == "fish":
        return _fish(verbs, with_recipe, nested)
    body = _bash(verbs, with_recipe, nested)
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body


def _bash(verbs: dict[str, list[str]], with_recipe: set[str], nested: dict[str, list[str]]) -> str:
    names = " ".join(v for v in verbs if v and " " not in v)
    cases = "\n".join(f"        {shlex.quote(v)}) opts={shlex.quote(' '.join(o))} ;;"
                      for v, o in verbs.items() if v)
    recipe_verbs = "|".join(shlex.quote(v) for v in sorted(with_recipe)) or "__none__"
    inner = "\n".join(f"        {shlex.quote(v)}) inner={shlex.quote(' '.join(n))} ;;"
                      for v, n in nested.items())
    paths = "|".join(PATH_OPTIONS)
    values = "|".join(PATH_OPTIONS + VALUE_OPTIONS)
    return f"""# sparktui completion for bash: eval "$(sparktui completion bash)"
_sparktui() {{
    local cur prev verb opts i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    verb=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            -*) ;;
            *) case "${{COMP_WORDS[i-1]}}" in {values}) ;; *) verb="${{COMP_WORDS[i]}}"; break ;; esac ;;
        esac
    done
    inner=""
    case "$verb" in
{inner or "        __none__) ;;"}
    esac
    if [[ -n "$inner" ]]; then  # a verb with verbs of its own: the next word names one
        local j sub=""
        for ((j = i + 1; j < COMP_CWORD; j++)); do
            case "${{COMP_WORDS[j]}}" in -*) ;; *) sub="${{COMP_WORDS[j]}}"; break ;; esac
        done
        if [[ -z "$sub" ]]; then
            [[ "$cur" != -* ]] && COMPREPLY=( $(compgen -W "$inner" -- "$cur") )
            return
        fi
        verb="$verb $sub"
    fi
    case "$prev" in
        {paths}) COMPREPLY=( $(compgen -f -- "$cur") ); return ;;
        {"|".join(VALUE_OPTIONS)}) return ;;
    esac
    if [[ -z "$verb" ]]; then
        if [[ "$cur" == -* ]]; then
            COMPREPLY=( $(compgen -W {shlex.quote(' '.join(verbs['']))} -- "$cur") )
        else
            COMPREPLY=( $(compgen -W {shlex.quote(names)} -- "$cur") )
        fi
        return
    fi
    opts=""
    case "$verb" in
{cases}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
        return
    fi
    case "$verb" in
        {recipe_verbs})
            COMPREPLY=( $(compgen -W "$(sparktui {HIDDEN} recipes 2>/dev/null)" -- "$cur") ) ;;
    esac
}}
complete -F _sparktui sparktui
"""


def _fish(verbs: dict[str, list[str]], with_recipe: set[str], nested: dict[str, list[str]]) -> str:
    names = " ".join(v for v in verbs if v and " " not in v)
    lines = ["# sparktui completion for fish: sparktui completion fish | source",
             "complete -c sparktui -f",
             f"complete -c sparktui -n __fish_use_subcommand -a {shlex.quote(names)}"]
    for verb, subs in nested.items():
        words = " ".join(subs)
        lines.append(f"complete -c sparktui -n '__fish_seen_subcommand_from {verb}; and not "
                     f"__fish_seen_subcommand_from {words}' -a {shlex.quote(words)}")
    for verb, opts in verbs.items():
        if not verb or verb in nested:
            continue
        cond = f"'__fish_seen_subcommand_from {verb.split()[-1]}'"
        for opt in opts:
            flag = f"-l {opt[2:]}"
            if opt in PATH_OPTIONS:
                flag += " -r -F"
            lines.append(f"complete -c sparktui -n {cond} {flag}")
        if verb in with_recipe:
            lines.append(f"complete -c sparktui -n {cond} -a '(sparktui {HIDDEN} recipes 2>/dev/null)'")
    return "\n".join(lines) + "\n"


def cmd_completion(args: argparse.Namespace, whole: Callable[[], argparse.ArgumentParser]) -> int:
    sys.stdout.write(script(args.shell, whole()))
    return 0


def arguments(p: argparse.ArgumentParser, whole: Callable[[], argparse.ArgumentParser]) -> None:
    """The verb's arguments. ``sparktui.cli`` declares the verb and hands over ``whole``, the
    parser of every verb that the script describes: nothing here imports the package back."""
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(func=functools.partial(cmd_completion, whole=whole))
