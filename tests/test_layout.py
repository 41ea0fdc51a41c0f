"""The repository's layout as the project's card names it: ``recipes/`` and ``themes/`` are
top-level folders beside ``sparktui/`` and ``tests/``, which the build maps into the package
(``setup.py``). From a checkout (this test's), ``config.shipped`` finds them there;
``tests/test_wheel.py`` proves a built wheel finds its copies from any folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui import config
from sparktui.config import recipes_dirs, shipped
from tests.conftest import ROOT


def test_recipes_and_themes_are_top_level() -> None:
    for name in ("recipes", "themes"):
        assert (ROOT / name).is_dir(), name
        assert not (ROOT / "sparktui" / name).exists(), f"sparktui/{name} is back inside the package"
    assert (ROOT / "recipes" / "demo-tp4" / "recipe.toml").is_file()
    assert sorted(p.name for p in (ROOT / "themes").glob("*.toml"))


def test_the_checkout_finds_its_shipped_folders() -> None:
    """Top-level folders beside the package; what stays inside it is still found inside."""
    assert shipped("recipes") == ROOT / "recipes"
    assert shipped("themes") == ROOT / "themes"
    assert shipped("schema") == ROOT / "sparktui" / "schema"


def test_a_folder_beside_an_installed_package_is_not_taken(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """site-packages may hold someone else's ``themes/``: beside the package counts only in a
    checkout (a folder with ``pyproject.toml``), else the package's own (here: none, so
    importlib.resources' answer inside the package)."""
    package = tmp_path / "site-packages" / "sparktui"
    package.mkdir(parents=True)
    (tmp_path / "site-packages" / "themes").mkdir()
    monkeypatch.setattr(config, "__file__", str(package / "config.py"))
    assert shipped("themes") != tmp_path / "site-packages" / "themes"
    (tmp_path / "site-packages" / "pyproject.toml").write_text("")
    assert shipped("themes") == tmp_path / "site-packages" / "themes"
    (package / "themes").mkdir()
    assert shipped("themes") == package / "themes"


def test_in_the_checkout_root_the_shipped_recipes_stay_last(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``./recipes`` is the shipped folder when sparktui runs from the checkout's root: the
    user's recipes still come first, as from any other folder, and no folder is listed twice."""
    user = tmp_path / "config" / "sparktui" / "recipes"
    user.mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SPARKTUI_RECIPES", raising=False)
    monkeypatch.chdir(ROOT)
    assert recipes_dirs() == [user.resolve(), (ROOT / "recipes").resolve()]
    elsewhere = tmp_path / "work"
    (elsewhere / "recipes").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    assert recipes_dirs() == [(elsewhere / "recipes").resolve(), user.resolve(), (ROOT / "recipes").resolve()]
