"""A secret's value wherever a plan quotes it (an ``sh -c`` string, another env value, a mount)
and a URL's password are masked in ``plan``, ``plan --json`` and the run's plan.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from sparktui.core.runstore import RunStore
from tests.conftest import RECIPES

KEY = "sk-plan-secret-99"
HIDDEN = (KEY, "hunter22", "pw-in-url-7")


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    """demo-tp4 with the key in an ``sh -c`` string, a non-secret env value and a mount, and a
    password in two URLs (an env value, an argument)."""
    text = (RECIPES / "demo-tp4" / "recipe.toml").read_text()
    for old, new in [
        ('entrypoint = ["python3", "-m", "sparktui.demo.engine"]',
         f'entrypoint = ["sh", "-c", "API_KEY={KEY} exec python3 -m sparktui.demo.engine '
         '\\"$@\\"", "sh"]'),
        ('    "--demo-boot-seconds", "2",\n',
         '    "--demo-boot-seconds", "2",\n'
         '    "--index-url", "https://alice:pw-in-url-7@pypi.example/simple",\n'),
        ('TP_SIZE = "4"\n', f'TP_SIZE = "4"\nAPI_KEY = "{KEY}"\nNOTE = "the key is {KEY}"\n'
                           'MIRROR = "https://bob:hunter22@mirror.example/x"\n'),
        ("[boot]", f'[[extra_mounts]]\nhost = "/srv/{KEY}"\ncontainer = "/keys"\n\n[boot]'),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    folder = tmp_path / "demo-plan-secrets"
    folder.mkdir()
    (folder / "recipe.toml").write_text(text)
    return folder / "recipe.toml"


def test_plan_text_and_json_mask_secrets_inside_strings(recipe: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(recipe)]) == 0
    text = capsys.readouterr().out
    assert main(["plan", str(recipe), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    container = data["ranks"][0]["container"]
    assert container["entrypoint"][2] == "API_KEY=******** exec python3 -m sparktui.demo.engine \"$@\""
    assert container["env"]["NOTE"] == "the key is ********"
    assert container["env"]["MIRROR"] == "https://bob:********@mirror.example/x"
    assert "https://alice:********@pypi.example/simple" in container["command"]
    assert container["mounts"][1]["source"] == "/srv/********"
    for shown in (text, json.dumps(data)):
        assert not [h for h in HIDDEN if h in shown]
    assert "/srv/******** → /keys" in text and "the key is ********" in text
    assert main(["plan", str(recipe), "--json", "--show-secrets"]) == 0
    assert KEY in capsys.readouterr().out  # asked for: shown


def test_the_runs_plan_json_masks_them_too(recipe: Path, tmp_path: Path) -> None:
    plan = build_plan(load_recipe(recipe), local_cluster(4), b"k" * 32)
    run = RunStore(tmp_path).create("demo-plan-secrets")
    run.write_plan(plan)
    saved = run.plan_path.read_text()
    assert not [h for h in HIDDEN if h in saved]
    assert "https://bob:********@mirror.example/x" in saved and "/srv/********" in saved
    redactor = plan.redactor()  # a URL's password is a secret in the run's lines too
    assert redactor.text("pip: hunter22 and pw-in-url-7") == "pip: ******** and ********"


def test_a_urls_password_is_masked_under_any_key(recipe: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(recipe), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    container = data["ranks"][0]["container"]
    assert container["env"]["MIRROR"] == "https://bob:********@mirror.example/x"  # not a secret key
    assert "https://alice:********@pypi.example/simple" in container["command"]  # nor flag
    assert "hunter22" not in data["ranks"][0]["docker_run"]
