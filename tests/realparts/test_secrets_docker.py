"""On the real test cluster: what a container prints of its secrets (live, and caught up with
``docker logs --since`` while no sparktui was following) reaches the run's files and ``logs``
masked."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.runner import secret_demo, sparktui_cli, state_env

pytestmark = pytest.mark.realparts

API_KEY = "sk-docker-secret-2718"
HF_TOKEN = "hf_docker_token_3141"
ECHO = ('entrypoint = ["sh", "-c", "echo boot key=$API_KEY token=$HF_TOKEN; '
        '(while sleep 0.5; do echo tick key=$API_KEY; done) & '
        'exec python3 -m sparktui.demo.engine \\"$@\\"", "sh"]')


def test_container_lines_are_masked_live_and_on_catch_up(testbed: Any, tmp_path: Path) -> None:
    recipe = secret_demo(tmp_path / "recipes", api_key=API_KEY, hf_token=HF_TOKEN,
                         extra_env=f'API_KEY = "{API_KEY}"\n')
    toml = recipe / "recipe.toml"
    toml.write_text(toml.read_text().replace(
        'entrypoint = ["python3", "-m", "sparktui.demo.engine"]', ECHO))
    state = tmp_path / "state"
    cli = sparktui_cli(testbed.cluster_file, state_env(state), recipe)
    try:
        up = cli("up", "--wait")
        assert up.returncode == 0, up.stdout + up.stderr
        time.sleep(3)  # ticks no sparktui follows: the next command catches them up
        logs = cli("logs", "--rank", "0", "--grep", "key=")
        assert "boot key=******** token=********" in logs.stdout, logs.stdout + logs.stderr
        assert "tick key=********" in logs.stdout
        (run,) = (state / "sparktui" / "runs").iterdir()
        caught = (run / "r0.log").read_text()
        assert caught.count("tick key=********") >= 4
        for text in (logs.stdout + logs.stderr, *(p.read_text() for p in run.iterdir()
                                                  if p.is_file())):
            assert API_KEY not in text and HF_TOKEN not in text
    finally:
        cli("down")
