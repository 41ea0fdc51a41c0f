"""Where a recipe's file is and the name it goes by, without reading it.

Apart from the recipe models (``core.recipe``, pydantic) so that ``sparktui logs`` of a run that
ended finds the run's folder (named by the recipe's slug) without loading them.
"""

from __future__ import annotations

from pathlib import Path


def slug_for(path: Path | None) -> str:
    """The recipe's name: its folder for ``<name>/recipe.toml``, else the file's name."""
    if path is None:
        return "recipe"
    if path.name == "recipe.toml":
        return path.parent.name or "recipe"
    name = path.name
    for suffix in (".recipe.toml", ".toml"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def locate(arg: str, recipes_dirs: list[Path]) -> Path | None:
    """The file ``arg`` names: a ``recipe.toml`` path, its folder, or a recipe name under one of
    ``recipes_dirs``; None when there is none (``core.recipe.find_recipe`` says why). OSError
    or RuntimeError for a name past the file-name limit or ``~`` without a home."""
    p = Path(arg).expanduser()
    if p.is_dir():
        candidate = p / "recipe.toml"
        return candidate if candidate.is_file() else None
    if p.is_file() or p.suffix == ".toml":
        return p
    for d in recipes_dirs:
        for candidate in (d / arg / "recipe.toml", d / f"{arg}.recipe.toml", d / f"{arg}.toml"):
            if candidate.is_file():
                return candidate
    return None


class RecipeEntry:
    """A recipe found in a folder (plain, not a NamedTuple: no ``typing`` on the path of
    ``sparktui logs``)."""

    __slots__ = ("path", "slug")

    def __init__(self, slug: str, path: Path) -> None:
        self.slug = slug
        self.path = path


def list_recipes(folder: Path) -> list[RecipeEntry]:
    """Recipes in a folder: ``<name>/recipe.toml`` and ``<name>.recipe.toml``, sorted by name."""
    if not folder.is_dir():
        return []
    found: dict[str, Path] = {}
    for child in sorted(folder.iterdir()):
        if child.is_dir() and (child / "recipe.toml").is_file():
            found[child.name] = child / "recipe.toml"
        elif child.is_file() and child.name.endswith(".recipe.toml"):
            found.setdefault(slug_for(child), child)
    return [RecipeEntry(slug, path) for slug, path in sorted(found.items())]
