"""The one part of the build that ``pyproject.toml`` cannot declare: the top-level ``recipes/``
and ``themes/`` folders shipped inside the package as ``sparktui/recipes`` and
``sparktui/themes`` (``package_dir`` maps them in). ``[tool.setuptools.packages.find]`` cannot
add a package that is not a folder under its parent, so the package list is found here, with
the two mapped folders added; the rest of the build (package data included) is in
``pyproject.toml``."""

from setuptools import find_packages, setup

SHIPPED = ("recipes", "themes")  # top-level folders -> sparktui.<name>

setup(
    packages=[*find_packages(include=["sparktui", "sparktui.*"]),  # not sparktui_testbed
              *(f"sparktui.{name}" for name in SHIPPED)],
    package_dir={f"sparktui.{name}": name for name in SHIPPED},
)
