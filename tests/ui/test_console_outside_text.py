"""Every place of the console that shows outside text, walked with hostile strings (issue 23):
the list is docs/design.md's "Outside text in the console", read from there, so a place added
to the list without a walk here fails.

Each string, wrapped in ``zq...qz``: action markup, style markup, an OSC title sequence, a C1
CSI and U+202E. Each place must show it as text, its escapes written out (``\\x1b``; the log
view's pictures, ``␛``), and nothing rendered may carry a link or an ``@click`` action (what
one click on a palette hit named ``[@click=app.screenshot(...)]x`` used to run). The console is
the real app on the 4-node test cluster file, offline: the backend's events are posted as the
Orchestrator posts them, the node's words in them."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest
from rich.segment import Segment
from textual.geometry import Region
from textual.pilot import Pilot
from textual.theme import Theme
from textual.widget import Widget
from textual.widgets import Label, OptionList, Static
from textual.widgets._toast import Toast

from sparktui.backend.doctor import Finding
from sparktui.backend.events import LogBatch, NodeTelemetry, Notice, RankChanged, StagingProgress
from sparktui.config import recipes_dirs, state_dir
from sparktui.core.metrics import MetricsUnreadable, Pulse, parse_exposition
from sparktui.core.ranks import RankSnapshot
from sparktui.core.telemetry import DiskSample, NodeSample
from sparktui.ui.app import SparkApp
from sparktui.ui.messages import BackendEvent
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.doctor_screen import DoctorScreen
from sparktui.ui.screens.events_screen import EventsScreen
from sparktui.ui.screens.plan_screen import PlanScreen
from sparktui.ui.screens.pulse_screen import PulseScreen
from sparktui.ui.themes import LoadedThemes, load_themes
from sparktui.ui.widgets.recipe_list import RecipeList
from sparktui.ui.widgets.recipe_pane import RecipePane
from tests.conftest import CLUSTER4, RECIPES, ROOT
from tests.ui.conftest import wait_for

# (raw, as the console writes it, as the log view writes it)
HOSTILE = {
    "action": ("[@click=app.quit]x", "[@click=app.quit]x", "[@click=app.quit]x"),
    "style": ("[b]x", "[b]x", "[b]x"),
    "osc": ("\x1b]0;t\x07", "\\x1b]0;t\\x07", "␛]0;t␇"),
    "c1": ("\x9b31m", "\\x9b31m", "�31m"),
    "bidi": ("\u202e", "\\u202e", "\\u202e"),
}
RAW = ("\x1b", "\x07", "\x9b", "\u202e")
SLUG = "hostile"
DESIGN = ROOT / "docs" / "design.md"


def listed_places() -> list[str]:
    """The places docs/design.md lists under "Outside text in the console": ``- `id`: ...``."""
    text = DESIGN.read_text()
    section = text.split("### Outside text in the console", 1)[1].split("\n### ", 1)[0]
    walked = section.split("The test reads this list:", 1)[1].lstrip("\n").split("\n\n", 1)[0]
    return re.findall(r"^- `([a-z-]+)`", walked, re.MULTILINE)


def segments(widget: Widget) -> list[Segment]:
    """What the widget and the widgets in it paint (borders, titles and scrollbars included)."""
    return [seg for w in (widget, *widget.query("*")) if w.display and w.outer_size.area
            for strip in w.render_lines(Region(0, 0, *w.outer_size)) for seg in strip]


def acts(seg: Segment) -> bool:
    """A segment a click would act on: a link, or an action in its meta."""
    style = seg.style
    if style is None:
        return False
    return bool(style.link) or any(key.startswith("@") for key in (style.meta or {}))


class Walk:
    """What each place showed."""

    def __init__(self, written: str, pictured: str) -> None:
        self.written, self.pictured = written, pictured
        self.seen: dict[str, str] = {}

    def check(self, place: str, widgets: Iterable[Widget], *, text: str | None = None,
              log_view: bool = False) -> None:
        """The marker as text in what ``widgets`` paint (or in ``text``, a label's whole
        content where its cell is narrower), nothing raw, nothing clickable."""
        segs = [seg for w in widgets for seg in segments(w)]
        painted = "".join(seg.text for seg in segs)
        shown = painted if text is None else text
        want = f"zq{self.pictured if log_view else self.written}qz"
        assert want in re.sub(r"\s+", "", shown), (place, want, shown)  # a cell may wrap it
        for raw in RAW:
            assert raw not in painted, (place, repr(raw), painted)
        assert not [seg for seg in segs if acts(seg)], (place, [seg for seg in segs if acts(seg)])
        self.seen[place] = shown


def toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string (\u001b included)


def hostile_recipes(tmp_path: Path, marker: str) -> Path:
    """A recipes folder whose own name is the marker (the recipe pane shows the path) holding
    the staged seed recipe with the marker as its title, an env value and a check, and a
    folder named with the marker (not a usable recipe name)."""
    folder = tmp_path / marker.replace("/", "_")
    text = (RECIPES / "dsv41-flash-4x-mia" / "recipe.toml").read_text()
    for old, new in (('name = "DeepSeek-V4.1-Flash (SGLang TP4, Mia production line)"',
                      f"name = {toml_str(marker)}"),
                     ("[env]\n", f"[env]\nNOTE = {toml_str(marker)}\n"),
                     ("must_show = [", f"must_show = [{toml_str(marker)}, ")):
        assert old in text
        text = text.replace(old, new, 1)
    (folder / SLUG).mkdir(parents=True)
    (folder / SLUG / "recipe.toml").write_text(text)
    shutil.copytree(RECIPES / "demo-tp4", folder / marker)
    return folder


def hostile_app(recipes: Path, marker: str) -> SparkApp:
    themes = load_themes()
    themes = LoadedThemes([*themes.themes, Theme(name=marker, primary="#4fa3f7")], themes.problems)
    options = ConsoleOptions([recipes], CLUSTER4, state_root=state_dir(), live=False,
                             clock=lambda: 1000.0, wall_clock=lambda: 1000.0, cursor_blink=False,
                             recipe=SLUG, remember=False)
    return SparkApp(options, theme="sparktui-dark", themes=themes)


async def palette_hits(pilot: Pilot[None], app: SparkApp, query: str) -> OptionList:
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: bool(app.screen.query("CommandList")), 5, "the palette")
    await pilot.pause(0.3)
    await pilot.press(*query)
    await pilot.pause(0.5)  # the palette gathers hits in batches
    return app.screen.query_one("CommandList", OptionList)


def hit_texts(hits: OptionList) -> list[str]:
    return [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_every_listed_place_shows_outside_text_as_text(tmp_path: Path, name: str) -> None:
    raw, written, pictured = HOSTILE[name]
    marker = f"zq{raw}qz"
    app = hostile_app(hostile_recipes(tmp_path, marker), marker)
    walk = Walk(written, pictured)
    async with app.run_test(size=(200, 60), notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
        assert main.session is not None and main.session.slug == SLUG
        nodes = [r.node for r in main.session.plan.ranks]

        recipes = main.query_one(RecipeList)
        unusable = [i for i in main.infos if not i.name_ok]
        assert [i.slug for i in unusable] == [marker]
        walk.check("recipe-list", [recipes])
        assert any(n.text.startswith(f'not a usable recipe name: "zq{written}qz" (') for n in main.state.notices)
        walk.check("recipe-pane", [main.query_one(RecipePane)])
        main.checks_panel.display = True
        await pilot.pause()
        walk.check("checks-panel", [main.checks_panel])

        main.post_message(BackendEvent(StagingProgress(main.staging.nodes[0], "engram", marker,
                                                       file=marker, bytes_done=1, bytes_total=4)))
        main.post_message(BackendEvent(StagingProgress(main.staging.nodes[1], "engram", "failed",
                                                       error=marker)))
        await pilot.pause(0.2)
        row = main.staging.query_one(f"#stage-{main.staging.nodes[0]}")
        walk.check("staging-phase", [row], text=str(row.query_one(".phase", Label).render()))
        walk.check("staging-panel", [main.staging])

        main.nodes_panel.display = True
        dst = f"/srv/{marker}"
        sample = NodeSample(mem_total=2**37, mem_available=2**36, unified=True, load1=1.0,
                            cpu_ticks=(1, 2), disks=[DiskSample(dst, 2**30, 2**40)], gpu_note=marker)
        main.post_message(BackendEvent(NodeTelemetry(nodes[0], "ok", sample, 5.0, warnings=[
            (f"low-disk:{dst}", f"{dst}: 1.0 GiB free, the recipe asks for 100 GiB")])))
        main.post_message(BackendEvent(NodeTelemetry(nodes[1], "unreachable", None, None,
                                                     f"ssh: {marker}")))
        await pilot.pause(0.2)
        walk.check("nodes-panel", [main.nodes_panel])
        painted = "".join(seg.text for seg in segments(main.nodes_panel))  # the border's warning
        assert f"⚠ {nodes[0]}: /srv/zq{written}qz: 1.0 GiB free" in painted, painted

        main.post_message(BackendEvent(RankChanged(RankSnapshot(0, nodes[0], "failed",
                                                                detail=f"fatal: {marker}"))))
        main.post_message(BackendEvent(Notice("error", f"node said: {marker}")))
        main.post_message(BackendEvent(LogBatch("offline", 0, [(1, "2026-01-01T00:00:00.000000000Z",
                                                                f"engine: {marker}")])))
        await pilot.pause(1.0)  # the failure toast waits for the rest of the group
        walk.check("rank-detail", [main.query_one("#rank-detail")])
        walk.check("toasts", list(app.screen.query(Toast)))
        walk.check("log-view", [main.logs.view], log_view=True)

        hits = await palette_hits(pilot, app, "qz")
        assert not [t for t in hit_texts(hits) if t.startswith("Recipe:")], hit_texts(hits)
        assert any(t.startswith(f"Theme: zq{written}qz") for t in hit_texts(hits)), hit_texts(hits)
        walk.check("palette", [hits])
        await pilot.press("escape")
        await pilot.pause(0.3)
        app.search_themes()
        await wait_for(pilot, lambda: bool(app.screen.query("CommandList")), 5, "the theme search")
        await pilot.pause(0.3)
        await pilot.press("q", "z")
        await pilot.pause(0.5)
        themes = app.screen.query_one("CommandList", OptionList)
        assert hit_texts(themes) == [f"zq{written}qz"], hit_texts(themes)
        # one hit, laid out under the input only as the palette's overlay settles: its prompt is
        # what the list paints (Content; a span from markup would carry the action)
        prompt = themes.get_option_at_index(0).prompt
        assert not [sp for sp in getattr(prompt, "spans", []) if "@" in str(sp.style)], prompt
        walk.check("theme-search", [themes], text=str(prompt))
        await pilot.press("escape")
        await pilot.pause(0.3)


        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EventsScreen), 5, "the events")
        await pilot.pause()
        walk.check("events-screen", [app.screen.query_one("#events-text", Static)])
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main, 5, "the main screen")

        main.action_plan()
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen), 5, "the plan")
        await pilot.pause()
        walk.check("plan-screen", app.screen.query(Static))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main, 5, "the main screen")

        async def findings() -> list[Finding]:
            return [Finding(nodes[0], "disk", "failed", f"df said: {marker}")]
        scraper = main.session.orch.metrics  # a page whose label quotes the marker
        spec = scraper.spec
        with pytest.raises(MetricsUnreadable) as unreadable:
            parse_exposition(f'{spec.series[1].family}{{model_name="{marker}"}} x\n', 1.0, spec)
        scraper.ranks, scraper.pulses[0] = [0], Pulse(spec)
        scraper.pulses[0].fail(f"GET {spec.path}: {unreadable.value}", 1.0)
        app.push_screen(PulseScreen(f"pulse · {SLUG}", scraper, {0: nodes[0]}))
        await wait_for(pilot, lambda: isinstance(app.screen, PulseScreen), 5, "the pulse")
        await pilot.pause()
        walk.check("pulse-screen", [app.screen.query_one("#pulse-r0")])
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main, 5, "the main screen")

        app.push_screen(DoctorScreen(f"doctor · {SLUG}", findings))
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen)
                       and app.screen.findings is not None, 5, "the doctor")
        await pilot.pause()
        walk.check("doctor-screen", [app.screen.query_one("#doctor-table")])
        await pilot.press("escape")
    assert sorted(walk.seen) == sorted(listed_places())


ACTION_FOLDER = "[@click=app.screenshot('victim.txt','..')]shared-demo"


async def test_a_recipe_folder_named_with_an_action_is_listed_and_never_offered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The screenshot attack of issue 23: ``./recipes`` (picked up from the current folder)
    holds ``[@click=app.screenshot('victim.txt','..')]shared-demo``. Its palette hit was
    "Recipe: shared-demo", the action in its segments' meta; a click wrote ../victim.txt. Now
    the recipe list says it is unusable and the palette has no hit for it."""
    work = tmp_path / "work"
    shutil.copytree(RECIPES / "demo-tp4", work / "recipes" / ACTION_FOLDER)
    monkeypatch.chdir(work)
    options = ConsoleOptions(recipes_dirs(), CLUSTER4, state_root=state_dir(), live=False,
                             cursor_blink=False, remember=False)
    app = SparkApp(options)
    async with app.run_test(size=(160, 50)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipes")

        hits = await palette_hits(pilot, app, "shared")
        if hits.option_count:  # (the old code's hit) painted once the palette's overlay settles
            await wait_for(pilot, lambda: "shared" in "".join(seg.text for seg in segments(hits)), 5,
                           "the hit painted")
        clickable = [seg for seg in segments(hits) if acts(seg)]
        assert not clickable, clickable  # the old hit: "Recipe: shared-demo", the action in its meta
        texts = hit_texts(hits)
        assert not [t for t in texts if "shared" in t], texts
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main, 5, "the palette closed")

        def listed() -> str:
            return re.sub(r"[│\s]+", "", "".join(s.text for s in segments(main.query_one(RecipeList))))
        await wait_for(pilot, lambda: "shared-demo" in listed(), 5, "the list laid out")  # it wraps
        assert f"✗{ACTION_FOLDER}·notausablerecipename" in listed(), listed()
        assert any(f'not a usable recipe name: "{ACTION_FOLDER}"' in n.text for n in main.state.notices)
        assert main.session is None or main.session.slug != ACTION_FOLDER
        main.activate(ACTION_FOLDER)  # nothing offers it; even asked, it is not opened
        await pilot.pause(0.3)
        assert main.session is None or main.session.slug != ACTION_FOLDER
    assert not (tmp_path / "victim.txt").exists()

