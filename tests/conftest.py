"""Suite-wide fixtures. Paths to the shipped recipes and a helper to write recipe variants."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "recipes"
SEED = RECIPES / "dsv41-flash-4x-mia" / "recipe.toml"
DATA = Path(__file__).resolve().parent / "data"
CLUSTER4 = DATA / "cluster-4.toml"
CLUSTER_SLURM4 = DATA / "cluster-slurm-4.toml"  # the same four ranks as one Slurm allocation

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under CI=true a real-parts test that skips has failed: the machine must provide them."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and item.get_closest_marker("realparts") is not None:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"real-parts test skipped under CI=true: {reason}"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the developer's own config, state or cluster file."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.delenv("SPARKTUI_CLUSTER", raising=False)
    monkeypatch.delenv("SPARKTUI_RECIPES", raising=False)


@pytest.fixture
def seed_text() -> str:
    return SEED.read_text()


@pytest.fixture
def write_recipe(tmp_path: Path, seed_text: str) -> Callable[..., Path]:
    """Write the seed with text replaced (``old -> new`` pairs) or appended; returns the path."""

    def write(*replacements: tuple[str, str], append: str = "", name: str = "variant") -> Path:
        text = seed_text
        for old, new in replacements:
            assert old in text, f"{old!r} is not in the seed recipe"
            text = text.replace(old, new, 1)
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        path = folder / "recipe.toml"
        path.write_text(text + append)
        return path

    return write
