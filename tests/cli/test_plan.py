"""`sparktui plan`: exactly what every rank will run."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.core.recipe import load_recipe
from tests.conftest import CLUSTER4, SEED

SEED_ARGS = load_recipe(SEED).spec.args
SEED_ENV = load_recipe(SEED).spec.env


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_seed_has_42_args_and_70_env() -> None:
    assert len(SEED_ARGS) == 42
    assert len(SEED_ENV) == 70


def test_four_node_plan(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, "recipes/dsv41-flash-4x-mia", "--cluster", str(CLUSTER4))
    assert data["recipe"]["engine"] == "sglang"
    assert data["recipe"]["path"].endswith("recipes/dsv41-flash-4x-mia/recipe.toml")
    assert data["cluster"] == {"name": "sparks", "local": False}
    assert len(data["ranks"]) == 4
    hf = {0: "/mnt/nas/hf", 1: "/mnt/nas/hf", 2: "/data/hf", 3: "/mnt/nas/hf"}
    for r, rank in enumerate(data["ranks"]):
        assert rank["rank"] == r
        assert rank["node"] == f"spark{r + 1}"
        c = rank["container"]
        assert c["image"] == "dsv41-4x-spark:mia-tp4"
        assert c["entrypoint"] == ["python3", "-m", "sglang.launch_server"]
        assert c["command"] == [*SEED_ARGS,
                                "--model-path", "deepseek-ai/DeepSeek-V4.1-Flash",
                                "--nnodes", "4", "--node-rank", str(r),
                                "--dist-init-addr", "192.168.200.1:25000",
                                "--host", "0.0.0.0", "--port", "30000", "--tp-size", "4"]
        assert c["env"] == SEED_ENV
        assert list(c["env"]) == list(SEED_ENV)
        mounts = {(m["source"], m["target"], m["read_only"]) for m in c["mounts"]}
        assert (hf[r], "/root/.cache/huggingface", False) in mounts
        assert ("/home/kilork/mia-state", "/state", False) in mounts
        assert c["shm_size"] == "32gb"
        assert c["network_mode"] == "host" and c["ipc_mode"] == "host"
        assert c["devices"] == ["/dev/infiniband"] and c["cap_add"] == ["IPC_LOCK"]
        assert c["ulimits"] == {"memlock": -1, "stack": 67108864}
        assert c["labels"]["sparktui.plan"] == data["plan_hash"]
        assert c["labels"]["sparktui.rank"] == str(r)
        assert set(c) == {"name", "image", "entrypoint", "command", "env", "mounts", "shm_size",
                          "network_mode", "ipc_mode", "gpus", "devices", "cap_add", "ulimits",
                          "labels"}
    assert data["ranks"][3]["container"]["gpus"] == "0"
    assert data["ranks"][2]["host"] == "spark3.lan"
    staging = data["staging"]
    assert [s["node"] for s in staging] == ["spark1", "spark2", "spark3", "spark4"]
    assert staging[2]["src"].startswith("/data/hf/hub/models--deepseek-ai--DeepSeek-V4.1-Flash/")
    assert all(s["min_free_bytes"] == 55 * 2**30 for s in staging)
    assert [s["ranks"] for s in staging] == [[0], [1], [2], [3]]
    boot = data["boot"]
    assert boot["ready"] == "The server is fired up and ready to roll!"
    assert boot["timeout_s"] == 1200
    assert len(boot["must_show"]) == 12
    rank0_only = [c for c in boot["must_show"] if c["ranks"] == [0]]
    assert [c["pattern"] for c in rank0_only] == [
        "max_total_num_tokens=..., chunked_prefill_size=4096, ... max_running_requests=16"]
    assert {"DIFFER", "CHECK FAILED", "MISMATCH", "Traceback (most recent call last):"} <= set(
        boot["must_not_show"])


def test_docker_run_line_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, str(SEED), "--cluster", str(CLUSTER4))
    rank = data["ranks"][1]
    words = shlex.split(rank["docker_run"])
    c = rank["container"]
    assert words[:3] == ["docker", "run", "-d"]
    image_at = words.index(c["image"])
    assert words[image_at + 1:] == c["entrypoint"][1:] + c["command"]
    assert words[words.index("--entrypoint") + 1] == "python3"
    envs = [words[i + 1] for i, w in enumerate(words) if w == "-e"]
    assert envs == [f"{k}={v}" for k, v in c["env"].items()]
    assert "--shm-size" in words and "32gb" in words
    assert words[words.index("--ulimit") + 1] == "memlock=-1"


def test_docker_run_quotes_hostile_values(write_recipe: Callable[..., Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "x; rm -rf / $(reboot) `id` 'q'"
    path = write_recipe(('STATE_PATH = "/state"', f'STATE_PATH = "{hostile}"'))
    data = plan_json(capsys, str(path), "--cluster", str(CLUSTER4))
    words = shlex.split(data["ranks"][0]["docker_run"])
    assert f"STATE_PATH={hostile}" in words


def test_secrets_masked_unless_asked(write_recipe: Callable[..., Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = write_recipe(('TP_SIZE = "4"', 'TP_SIZE = "4"\nHF_TOKEN = "hf_supersecret"\n'
                                          'API_KEY = "sk-123"\nDB_PASSWORD = "pw"'))
    masked = plan_json(capsys, str(path), "--cluster", str(CLUSTER4))
    text = json.dumps(masked)
    assert "hf_supersecret" not in text and "sk-123" not in text and '"pw"' not in text
    assert masked["ranks"][0]["container"]["env"]["HF_TOKEN"] == "********"
    assert "HF_TOKEN=********" in masked["ranks"][0]["docker_run"]
    shown = plan_json(capsys, str(path), "--cluster", str(CLUSTER4), "--show-secrets")
    assert shown["ranks"][0]["container"]["env"]["HF_TOKEN"] == "hf_supersecret"
    assert masked["plan_hash"] == shown["plan_hash"]
    assert main(["plan", str(path), "--cluster", str(CLUSTER4)]) == 0
    assert "hf_supersecret" not in capsys.readouterr().out


def test_plan_hash_is_stable_and_sensitive(write_recipe: Callable[..., Path],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    a = plan_json(capsys, str(SEED), "--cluster", str(CLUSTER4))["plan_hash"]
    b = plan_json(capsys, str(SEED), "--cluster", str(CLUSTER4))["plan_hash"]
    assert a == b and len(a) == 12
    changed = write_recipe(('DSV41_CACHE_GIB = "4"', 'DSV41_CACHE_GIB = "5"'))
    c = plan_json(capsys, str(changed), "--cluster", str(CLUSTER4))["plan_hash"]
    assert c != a
    commented = write_recipe(("# Their production shape", "# A comment changes nothing"),
                             name="dsv41-flash-4x-mia")
    d = plan_json(capsys, str(commented), "--cluster", str(CLUSTER4))["plan_hash"]
    assert d == a


def test_local_cluster_without_cluster_file(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, "recipes/dsv41-flash-4x-mia")
    assert data["cluster"] == {"name": "local", "local": True}
    assert [r["node"] for r in data["ranks"]] == ["local0", "local1", "local2", "local3"]
    for r, rank in enumerate(data["ranks"]):
        cmd = rank["container"]["command"]
        assert cmd[cmd.index("--dist-init-addr") + 1] == "127.0.0.1:25000"
        assert cmd[cmd.index("--port") + 1] == str(30000 + r)  # ranks share one host
        assert rank["container"]["gpus"] == "none"


def test_recipe_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, "dsv41-flash-4x-mia")
    assert data["recipe"]["slug"] == "dsv41-flash-4x-mia"


def test_cluster_from_environment(capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKTUI_CLUSTER", str(CLUSTER4))
    assert plan_json(capsys, str(SEED))["cluster"]["name"] == "sparks"


def test_plan_refuses_lint_errors(write_recipe: Callable[..., Path],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = write_recipe(('EP_SIZE = "1"', 'EP_SIZE = "4"'))
    assert main(["plan", str(path), "--json"]) == 2  # a recipe that cannot be used: usage
    err = capsys.readouterr().err
    assert "env.EP_SIZE: EP_SIZE='4' disagrees with --ep-size 1" in " ".join(err.split())


def test_human_output_one_section_per_rank(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SEED), "--cluster", str(CLUSTER4)]) == 0
    out = capsys.readouterr().out
    for r in range(4):
        assert f"rank {r} · spark{r + 1}" in out
    assert out.count("docker run") >= 4
    assert "--node-rank 3" in out
    assert "DSV41_PACKED_DIR" in out
