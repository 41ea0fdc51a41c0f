"""``sparktui --metrics``: the console serves the open recipe's state for Prometheus (what
``watch --metrics`` serves), on loopback, following the recipe opened, gone when it quits."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.config import state_dir
from sparktui.ui.app import SparkApp
from sparktui.ui.options import ConsoleOptions
from tests.conftest import RECIPES
from tests.ui.conftest import sparktui, wait_for


def states(url: str) -> dict[tuple[str, str], str]:
    """(recipe, rank) -> the state whose series is 1, as the client's parser reads the page."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name == "sparktui_rank_state":
            for s in family.samples:
                if s.value == 1:
                    out[(s.labels["recipe"], s.labels["rank"])] = s.labels["state"]
    return out


async def test_the_console_serves_the_open_recipe_on_loopback() -> None:
    options = ConsoleOptions([RECIPES], None, state_root=state_dir(), recipe="demo-tp4",
                             metrics=("127.0.0.1", 0), remember=False)
    app = SparkApp(options)
    async with app.run_test(size=(160, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
        export = main.export
        assert export is not None and export.server is not None
        assert export.server.server_address[0] == "127.0.0.1"
        url = export.where
        assert any("for Prometheus on http://127.0.0.1:" in n.text for n in main.state.notices)
        got = await asyncio.to_thread(states, url)
        assert {k for k in got} == {("demo-tp4", str(r)) for r in range(4)}
        assert set(got.values()) == {"pending"}
        await main.open_recipe("demo-vllm-tp4")  # the export follows the recipe opened
        await wait_for(pilot, lambda: main.session is not None
                       and main.session.slug == "demo-vllm-tp4", 15, "the other recipe")
        main.export.refresh()  # type: ignore[union-attr]
        got = await asyncio.to_thread(states, url)
        assert {recipe for recipe, _ in got} == {"demo-vllm-tp4"}
    with pytest.raises(urllib.error.URLError):  # the console closed: so is the endpoint
        await asyncio.to_thread(urllib.request.urlopen, url, None, 2)


def test_a_bad_address_is_a_sentence_and_exit_2() -> None:
    res = sparktui("--metrics", "here:there")
    assert res.returncode == 2
    assert "--metrics 'here:there': give PORT or HOST:PORT (a port 1-65535)" in res.stderr
