"""Themes and keys: t switches and remembers the theme; config.toml remaps keys by binding id."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from sparktui.config import config_dir
from sparktui.core.ranks import RankSnapshot
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.help_screen import HelpScreen
from sparktui.ui.screens.plan_screen import PlanScreen
from sparktui.ui.screens.restart_screen import RestartScreen
from sparktui.ui.themes import rank_colors
from tests.conftest import CLUSTER4
from tests.ui.conftest import wait_for


def _app(recipes: Path) -> SparkApp:
    return SparkApp(ConsoleOptions([recipes], CLUSTER4, live=False, cursor_blink=False))


async def test_theme_switch_is_remembered(recipes_copy: Path) -> None:
    app = _app(recipes_copy)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "recipes")
        assert app.theme == "sparktui-dark"
        dark_ranks = rank_colors(app.theme_variables)
        await pilot.press("t")
        await pilot.pause(0.1)
        assert app.theme != "sparktui-dark" and app.theme in app.theme_names
        assert rank_colors(app.theme_variables) != dark_ranks  # the rank colours follow the theme
        chosen = app.theme
    state = json.loads((config_dir() / "state.json").read_text())
    assert state["theme"] == chosen
    again = _app(recipes_copy)
    async with again.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.1)
        assert again.theme == chosen


async def test_ships_dark_light_and_high_contrast_themes(recipes_copy: Path) -> None:
    app = _app(recipes_copy)
    async with app.run_test(size=(100, 30)):
        assert {"sparktui-dark", "sparktui-light", "sparktui-contrast"} <= set(app.theme_names)
        assert not app.get_theme("sparktui-light").dark  # type: ignore[union-attr]


async def test_user_theme_and_keymap_from_config(recipes_copy: Path) -> None:
    folder = config_dir()
    (folder / "themes").mkdir(parents=True)
    (folder / "themes" / "mine.toml").write_text(
        'name = "mine"\nprimary = "#ff0000"\nrank_colors = ["#010203", "#040506"]\n')
    (folder / "config.toml").write_text('theme = "mine"\n[keys]\nrestart = "R"\nplan = "P,f2"\n')
    app = _app(recipes_copy)
    async with app.run_test(size=(100, 30)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 10, "recipes")
        assert app.theme == "mine"
        assert rank_colors(app.theme_variables) == ["#010203", "#040506"]
        assert main.session is not None
        # something to restart (never contacted), as the Orchestrator would report it
        main.state.rank_changed(RankSnapshot(0, "spark1", "ready", container_id="c0ffee",
                                             has_container=True))
        await pilot.press("r")  # no longer bound
        await pilot.pause(0.1)
        assert not isinstance(app.screen, RestartScreen)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartScreen), 5, "restart dialog")
        await pilot.press("escape")
        await pilot.press("f2")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen), 5, "plan")
        await pilot.press("escape")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), 5, "help")
        assert "R" in str(app.screen.query_one("#help-keys").render())


async def test_bad_settings_are_reported_not_fatal(recipes_copy: Path) -> None:
    folder = config_dir()
    (folder / "themes").mkdir(parents=True)
    (folder / "themes" / "broken.toml").write_text('primary = "not a colour"\n')
    (folder / "config.toml").write_text('[keys]\nrestart = 3\n[logs]\nwindow = "x"\n')
    app = _app(recipes_copy)
    async with app.run_test(size=(100, 30)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 10, "recipes")
        texts = " | ".join(ev.text for ev in main.state.notices)
        assert "broken.toml" in texts and "keys.restart" in texts and "logs.window" in texts


async def test_every_binding_has_an_id() -> None:
    from sparktui.ui.screens.main_screen import MainScreen

    ids = [b.id for b in MainScreen.BINDINGS if not isinstance(b, tuple)]
    assert all(ids) and len(ids) == len(set(ids))


async def test_palette_offers_every_action(offline_app: Callable[..., SparkApp]) -> None:
    from sparktui.ui.commands import SparkCommands
    from sparktui.ui.keys import KEYS

    app = offline_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, app.main_screen.ready.is_set, 10, "recipes")
        names = [name for name, _cmd, _help in SparkCommands(app.main_screen).commands()]
    for spec in KEYS:
        if spec.palette:
            assert spec.command in names, spec.id
    assert "Recipe: demo-tp4" in names and "Theme: sparktui-light" in names


async def test_a_plan_key_that_cannot_be_used_is_said_not_fatal(recipes_copy: Path) -> None:
    """One rule with the CLI (``config.cluster_plan``): the key is an error naming it; the
    console opens the recipe without its containers and says why, and p says it again."""
    from sparktui.config import state_dir

    key = state_dir() / "keys" / "sparks.key"
    key.parent.mkdir(parents=True, mode=0o700)
    key.write_bytes(b"short")
    key.chmod(0o600)
    app = _app(recipes_copy)
    async with app.run_test(size=(100, 30)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 10, "recipes")
        assert main.session is None
        texts = " | ".join(ev.text for ev in main.state.notices)
        assert "cannot use the plan key of cluster 'sparks'" in texts and "not a sparktui key" in texts
        await pilot.press("p")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, PlanScreen)


BAD_CONFIG = '''theme = "sparktui-light"
colour = "red"
[keys]
restart = "R"
restrat = "x"
[logs]
window = 500
[telemetry]
low_memry = "1G"
'''


def test_config_is_read_through_strict_models_with_file_line_and_key(tmp_path: Path) -> None:
    """An unknown key or binding id is a problem at its file, line and key with a did-you-mean,
    as in a recipe; what is right still applies."""
    from sparktui.ui.settings import load_settings

    (tmp_path / "config.toml").write_text(BAD_CONFIG)
    settings = load_settings(tmp_path, environ={})
    said = [str(p) for p in settings.problems]
    path = tmp_path / "config.toml"
    assert said == [
        f"{path}:2:1: error: colour: unknown key 'colour'; allowed keys: theme, keys, logs, "
        "telemetry, health",
        f"{path}:9:1: error: telemetry.low_memry: unknown key 'low_memry'; did you mean 'low_memory'?",
        f"{path}:5:1: error: keys.restrat: unknown binding id 'restrat'; did you mean 'restart'?",
    ]
    assert (settings.theme, settings.keys, settings.window) == ("sparktui-light", {"restart": "R"}, 500)


def test_a_dialogs_binding_id_is_known(tmp_path: Path) -> None:
    from sparktui.ui.settings import load_settings

    (tmp_path / "config.toml").write_text('[keys]\nrestart-rank-only = "o"\nplan-close = "x,escape"\n')
    settings = load_settings(tmp_path, environ={})
    assert settings.problems == []
    assert settings.keys == {"restart-rank-only": "o", "plan-close": "x,escape"}


def test_sparktui_variables_override_the_file(tmp_path: Path) -> None:
    from sparktui.ui.settings import load_settings

    (tmp_path / "config.toml").write_text('theme = "a"\n[logs]\nwindow = 500\n[health]\ninterval = "20s"\n')
    settings = load_settings(tmp_path, environ={
        "SPARKTUI_THEME": "b", "SPARKTUI_LOGS__WINDOW": "2000", "SPARKTUI_TELEMETRY__INTERVAL": "5s",
        "SPARKTUI_TELEMETRY__LOW_MEMORY": "4G", "SPARKTUI_CLUSTER": "/elsewhere.toml"})
    assert settings.problems == []
    assert (settings.theme, settings.window, settings.interval, settings.low_memory,
            settings.health_interval) == ("b", 2000, 5.0, 4 * 2**30, 20.0)


def test_a_bad_variable_is_named_and_the_files_value_kept(tmp_path: Path) -> None:
    from sparktui.ui.settings import load_settings

    (tmp_path / "config.toml").write_text('[logs]\nwindow = 500\n')
    settings = load_settings(tmp_path, environ={"SPARKTUI_LOGS__WINDOW": "many",
                                                "SPARKTUI_TELEMETRY__INTERVL": "3s"})
    assert sorted(str(p) for p in settings.problems) == [
        "$SPARKTUI_LOGS__WINDOW: error: logs.window: expected an integer, found a string 'many'",
        "$SPARKTUI_TELEMETRY__INTERVL: error: no setting telemetry.intervl; did you mean "
        "SPARKTUI_TELEMETRY__INTERVAL?",
    ]
    assert settings.window == 500


def test_every_setting_says_what_it_is() -> None:
    from pydantic import BaseModel

    from sparktui.ui.settings import ConfigFile

    def fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str | None]]:
        out = []
        for name, info in model.model_fields.items():
            out.append((prefix + name, info.description))
            if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
                out += fields(info.annotation, f"{prefix}{name}.")
        return out

    found = fields(ConfigFile)
    assert {"theme", "keys", "logs.window", "telemetry.interval", "telemetry.low_memory",
            "health.interval"} <= {name for name, _ in found}
    assert [name for name, text in found if not text] == []


async def test_the_console_names_the_file_line_and_key(recipes_copy: Path) -> None:
    config_dir().mkdir(parents=True)
    (config_dir() / "config.toml").write_text(BAD_CONFIG)
    app = _app(recipes_copy)
    async with app.run_test(size=(100, 30)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 10, "recipes")
        texts = [ev.text for ev in main.state.notices]
        assert any("config.toml:5:1: error: keys.restrat: unknown binding id 'restrat'; did you "
                   "mean 'restart'?" in t for t in texts), texts
        assert any("config.toml:2:1: error: colour: unknown key 'colour'" in t for t in texts), texts
        assert app.theme == "sparktui-light"  # the rest applies
