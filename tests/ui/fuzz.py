"""A seeded key-sequence fuzz of the whole console (``SparkApp`` under Textual's Pilot).

Each step is drawn from: every binding of the key table, the command palette's actions (every
recipe among them, the open one too), dialogs answered and cancelled, grep patterns (valid,
invalid, inverted, empty), resizes between 60x20 and 220x60, and navigation keys. The demo ranks
really boot, fail, restart and flood meanwhile. A failure names the seed and the steps that lead
to it, so ``replay(seed, steps)`` reproduces it.
"""

from __future__ import annotations

import asyncio
import random
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual import events
from textual.app import App
from textual.drivers.headless_driver import HeadlessDriver
from textual.geometry import Size
from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key
from textual.pilot import Pilot
from textual.widgets import Input

from sparktui.ui import app as app_module
from sparktui.ui.app import SparkApp
from sparktui.ui.keys import ALL_KEYS
from sparktui.ui.options import ConsoleOptions
from sparktui.ui.screens.confirm_screen import ConfirmScreen
from tests.ui.conftest import wait_for

QUIT = {"quit"}  # quitting ends the run: not drawn (the palette's quit is counted, not run)
GREPS = ("tick", "!tick", "rendezvous|ready", "(", "[", "", "!", "R0", "#running-req: 1[0-5],",
         "re:x", "\\", "a{9999}", "[/red]", "\x1b[31m")
PALETTE = ("Recipe: ", "theme", "logs", "grep", "restart", "down", "plan", "help", "Side by side",
           "wrap", "nodes", "check", "doctor", "zzz-no-such-command")
DIALOG = ("y", "n", "escape", "r", "g", "enter", "tab")
NAV = ("up", "down", "tab", "shift+tab", "enter", "pageup", "pagedown", "home", "end", "space")
KEY_GAP_S = 0.005
STEP_GAP_S = 0.02


@dataclass(frozen=True)
class Step:
    kind: str  # key, keys, grep, palette, resize, dialog, pause
    value: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.value!r}"


def bound_keys() -> list[str]:
    keys: list[str] = []
    for spec in ALL_KEYS:
        if spec.id not in QUIT:
            keys += [k.strip() for k in spec.key.split(",")]
    return keys


def steps(seed: int, count: int, recipes: list[str]) -> list[Step]:
    """The same seed gives the same steps."""
    rng = random.Random(seed)
    keys = bound_keys()
    out: list[Step] = []
    while len(out) < count:
        roll = rng.random()
        if roll < 0.45:
            out.append(Step("key", rng.choice(keys)))
        elif roll < 0.55:
            out.append(Step("dialog", rng.choice(DIALOG)))
        elif roll < 0.65:
            out.append(Step("nav", rng.choice(NAV)))
        elif roll < 0.73:
            out.append(Step("grep", rng.choice(GREPS)))
        elif roll < 0.83:
            name = rng.choice(PALETTE)
            if name == "Recipe: ":
                name += rng.choice(recipes)
            out.append(Step("palette", name))
        elif roll < 0.90:
            out.append(Step("resize", f"{rng.randint(60, 220)}x{rng.randint(20, 60)}"))
        elif roll < 0.95:
            out.append(Step("text", "".join(rng.choice("ab[]/\\!^$.*?x0 ") for _ in range(rng.randint(1, 6)))))
        else:
            out.append(Step("pause", f"{rng.choice((0.05, 0.2, 0.5))}"))
    return out


def keys_in(played: list[Step]) -> int:
    """How many keys the steps press."""
    n = 0
    for step in played:
        if step.kind in ("key", "dialog", "nav"):
            n += 1
        elif step.kind == "text":
            n += len(step.value)
        elif step.kind in ("grep", "palette"):
            n += len(step.value) + 2
    return n


async def press(app: App[None], *keys: str) -> None:
    """Keys as a terminal delivers them: through the driver, at a typist's pace, without
    waiting for the app to go idle (under a flood it never does; ``Pilot.press`` would wait a
    second per key)."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        if len(key) == 1 and not key.isalnum():
            key = _character_to_key(key)
        original = REPLACED_KEYS.get(key, key)
        try:
            char: str | None = unicodedata.lookup(_get_unicode_name_from_key(original))
        except KeyError:
            char = key if len(key) == 1 else None
        event = events.Key(key, char)
        event.set_sender(app)
        driver.send_message(event)
        await asyncio.sleep(KEY_GAP_S)


async def play(pilot: Pilot[None], step: Step) -> None:
    """One step, as a person would do it."""
    app = pilot.app
    kind, value = step.kind, step.value
    if kind in ("key", "dialog", "nav"):
        await press(app, value)
    elif kind == "text":
        await press(app, *value)
    elif kind == "grep":
        await press(app, "slash", *value, "enter")
    elif kind == "palette":
        await press(app, "ctrl+p", *value)
        await asyncio.sleep(0.1)  # the palette searches in a worker
        await press(app, "enter")
    elif kind == "resize":
        w, h = (int(n) for n in value.split("x"))
        size = Size(w, h)
        if isinstance(app._driver, HeadlessDriver):
            app._driver._size = size
        app.post_message(events.Resize(size, size))
    elif kind == "pause":
        await asyncio.sleep(float(value))
    await asyncio.sleep(STEP_GAP_S)
    if app._exception is not None:
        raise app._exception


async def run(pilot: Pilot[None], seed: int, count: int, recipes: list[str],
              between: Callable[[int], object] | None = None, trace: Path | None = None) -> list[Step]:
    """Play ``count`` steps of ``seed``; on any failure the seed and the steps so far are in
    the error."""
    played: list[Step] = []
    for i, step in enumerate(steps(seed, count, recipes)):
        played.append(step)
        if trace is not None:
            with trace.open("a") as f:
                print(i, step, f"screen={type(pilot.app.screen).__name__}", file=f)
        try:
            await play(pilot, step)
            if between is not None:
                between(i)
        except Exception as exc:
            raise AssertionError(f"console fuzz seed {seed} failed at step {i} ({step}): {exc!r}\n"
                                 f"replay: {[str(s) for s in played]}") from exc
    return played


class FuzzApp(SparkApp):
    """Quitting ends a run on purpose: the fuzz counts it and plays on (the quit path and the
    reattach after it are tested in test_console_reattach.py)."""

    CSS_PATH = str(Path(app_module.__file__).parent / "app.tcss")  # resolved from this module otherwise
    quits = 0

    async def action_quit(self) -> None:
        self.quits += 1

    @classmethod
    def made(cls, options: ConsoleOptions, monkeypatch: pytest.MonkeyPatch) -> FuzzApp:
        """The app; the main screen's ``q`` is the app's quit (``app.quit``), counted too."""
        return cls(options)


def stack(app: SparkApp) -> str:
    """The screens from the bottom up, for a failure's words."""
    return " > ".join(type(screen).__name__ for screen in app.screen_stack)


async def take_down(pilot: Pilot[None], *, busy_timeout: float = 60) -> None:
    """After a fuzz: close every dialog (those opened from the palette stack up), wait for the
    last action, then ``x`` + ``y`` the open recipe from its own dialog, as an operator would."""
    app = pilot.app
    assert isinstance(app, SparkApp)
    main = app.main_screen
    # back to the main screen, however many escapes its dialogs take (the palette: up to three,
    # its list, then its text, then itself) and however slowly each closes under load (CI's
    # fuzz lane once left a dialog open after twenty, and the ``x`` went to it)
    async def back_to_main() -> None:
        end = time.monotonic() + 30
        while app.screen is not main:
            assert time.monotonic() < end, f"still on {app.screen!r} after 30 s of escapes: {stack(app)}"
            await pilot.press("escape")
            await pilot.pause(0.1)

    await back_to_main()
    await wait_for(pilot, lambda: main.busy is None, busy_timeout, "the last action to end")
    if main.session is not None and any(main.state.has_container(r) for r in range(main.session.world)):
        # a dialog a fuzz key still in flight opens meanwhile (CI once met the restart dialog
        # where the down dialog was due) is closed and the x pressed again, up to three times
        for attempt in range(3):
            await back_to_main()
            if isinstance(app.focused, Input):  # a key typed last left the grep open
                app.focused.blur()
            await pilot.press("x")
            try:
                await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 15, "the down dialog")
                break
            except AssertionError as exc:  # what the x met instead
                if attempt == 2 or app.screen is main:
                    raise AssertionError(f"{exc} (screens {stack(app)}, focused {app.focused!r}, "
                                         f"busy {main.busy!r})") from None
        await pilot.press("y")
        await wait_for(pilot, lambda: main.busy is None, 60, "down")

