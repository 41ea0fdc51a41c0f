"""`sparktui validate`: one paragraph per problem, naming file, key and line; never a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.cli import main
from tests.conftest import CLUSTER4, SEED


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())  # rich wraps at 80 columns
    assert "Traceback" not in text
    return code, text


def line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_seed_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "validate", str(SEED.parent))
    assert code == 0
    assert "valid for cluster 'local'" in text


def test_seed_is_valid_on_four_node_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "validate", str(SEED), "--cluster", str(CLUSTER4))
    assert code == 0
    assert "valid for cluster 'sparks' (4 of 4 nodes)" in text


def test_unknown_key_suggests(capsys: pytest.CaptureFixture[str],
                              write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('shm_size = "32gb"', 'shm_sise = "32gb"'))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    line = line_of(path, "shm_sise")
    assert f"recipe.toml:{line}:1: error: shm_sise: unknown key 'shm_sise'; did you mean 'shm_size'?" in text


def test_unknown_key_in_staging_table(capsys: pytest.CaptureFixture[str],
                                      write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('min_free = "55G"', 'min_fre = "55G"'))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    assert "staging[0].min_fre: unknown key 'min_fre'; did you mean 'min_free'?" in text


def test_wrong_type(capsys: pytest.CaptureFixture[str], write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(("port = 30000", 'port = "30000"'))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    line = line_of(path, 'port = "30000"')
    assert f":{line}:1: error: port: expected an integer, found a string '30000'" in text


def test_env_value_must_be_string(capsys: pytest.CaptureFixture[str],
                                  write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('TP_SIZE = "4"', "TP_SIZE = 4"))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    assert "env.TP_SIZE: expected a string, found an integer 4" in text


def test_missing_required_key(capsys: pytest.CaptureFixture[str],
                              write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('docker_image = "dsv41-4x-spark:mia-tp4"\n', ""))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    assert "error: docker_image: missing required key 'docker_image'" in text


def test_bad_size(capsys: pytest.CaptureFixture[str], write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('min_free = "55G"', 'min_free = "55Q"'))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    line = line_of(path, 'min_free = "55Q"')
    assert f":{line}:1: error: staging[0].min_free: bad size '55Q'" in text
    assert "for example 55G" in text


def test_unknown_placeholder(capsys: pytest.CaptureFixture[str],
                             write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('src = "{{hf}}/hub', 'src = "{{hff}}/hub'))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    line = line_of(path, "{{hff}}")
    assert f":{line}:1: error: staging[0].src: unknown placeholder {{{{hff}}}}; did you mean {{{{hf}}}}?" in text


def test_launcher_owned_flag(capsys: pytest.CaptureFixture[str],
                             write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('"--trust-remote-code",', '"--trust-remote-code", "--port", "31000",'))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    line = line_of(path, '"--port", "31000"')
    assert re.search(rf":{line}:\d+: error: args\[3\]: --port is set by the launcher", text)
    assert "remove it from args" in text


def test_tp_size_disagrees(capsys: pytest.CaptureFixture[str],
                           write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('TP_SIZE = "4"', 'TP_SIZE = "3"'))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    line = line_of(path, 'TP_SIZE = "3"')
    assert (f":{line}:1: error: env.TP_SIZE: TP_SIZE='3' disagrees with "
            "tensor_parallel_size = 4") in text


def test_required_nodes_above_cluster(capsys: pytest.CaptureFixture[str],
                                      write_recipe: Callable[..., Path], tmp_path: Path) -> None:
    cluster = tmp_path / "two.toml"
    text4 = CLUSTER4.read_text()
    cluster.write_text(text4[: text4.index('[[nodes]]\nname = "spark3"')])
    code, text = run(capsys, "validate", str(SEED), "--cluster", str(cluster))
    assert code == 1
    line = line_of(SEED, "required_nodes = 4")
    assert (f":{line}:1: error: required_nodes: the recipe needs 4 nodes but cluster 'sparks'"
            in text)
    assert "has 2" in text


def test_toml_syntax_error(capsys: pytest.CaptureFixture[str],
                           write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(("port = 30000", "port = = 30000"))
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    line = line_of(path, "port = = 30000")
    assert f"recipe.toml:{line}:8: error: TOML syntax error: Invalid value" in text


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, text = run(capsys, "validate", str(tmp_path / "nope.toml"))
    assert code == 1
    assert "nope.toml: error: file not found" in text


def test_unknown_recipe_name_suggests(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "validate", "dsv41-flash-4x-mai")
    assert code == 1
    assert "no recipe named 'dsv41-flash-4x-mai'; did you mean 'dsv41-flash-4x-mia'?" in text


def test_bad_cluster_file_names_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cluster = tmp_path / "c.toml"
    cluster.write_text(CLUSTER4.read_text().replace("fabric_ip", "fabric_addr", 1))
    code, text = run(capsys, "validate", str(SEED), "--cluster", str(cluster))
    assert code == 1
    assert "nodes[0].fabric_addr: unknown key 'fabric_addr'; did you mean 'fabric_ip'?" in text


def test_warnings_do_not_fail(capsys: pytest.CaptureFixture[str],
                              write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('"--cuda-graph-max-bs-decode", "16"', '"--cuda-graph-max-bs-decode", "8"'))
    code, text = run(capsys, "validate", str(path))
    assert code == 0
    assert "warning: args[" in text and "1 warning(s)" in text


def test_several_recipes_one_bad(capsys: pytest.CaptureFixture[str],
                                 write_recipe: Callable[..., Path]) -> None:
    bad = write_recipe(("port = 30000", "port = -1"))
    code, text = run(capsys, "validate", str(SEED), str(bad))
    assert code == 1
    assert "valid for cluster" in text
    assert "port: Input should be greater than or equal to 1" in text


def test_real_process_prints_no_traceback(write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('engine = "sglang"', 'engine = "sglng"'))
    proc = subprocess.run([sys.executable, "-m", "sparktui", "validate", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "engine: must be one of 'sglang' or 'vllm'; found 'sglng'; did you mean 'sglang'?" in \
        " ".join(proc.stderr.split())


def test_ray_backend_is_refused_not_half_supported(capsys: pytest.CaptureFixture[str],
                                                    write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('distributed_backend = "mp"', 'distributed_backend = "ray"'))
    line = line_of(path, 'distributed_backend = "ray"')
    code, text = run(capsys, "validate", str(path))
    assert code == 1
    assert (f"recipe.toml:{line}:1: error: distributed_backend: 'ray' is not supported yet"
            in text)
    code, text = run(capsys, "plan", str(path))  # every verb that loads the recipe refuses it
    assert code == 2  # (exit 2: a recipe that cannot be used; only validate says 1)
    assert f"recipe.toml:{line}:1: error: distributed_backend: 'ray' is not supported yet" in text


def test_a_flag_sglang_does_not_know_is_a_warning_naming_the_version_and_line(
        capsys: pytest.CaptureFixture[str], write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('    "--watchdog-timeout", "1800",\n',
                         '    "--watchdog-timeout", "1800",\n    "--enable-foo",\n'))
    code, text = run(capsys, "validate", str(path), "--cluster", str(CLUSTER4))
    assert code == 0
    line = line_of(path, '"--enable-foo"')
    assert (f"recipe.toml:{line}:5: warning: args[42]: --enable-foo is not a flag of SGLang "
            "0.5.23 (checked against its own parser's table") in text
    assert "1 warning(s)" in text


def test_a_value_sglang_refuses_is_an_error_with_its_line(
        capsys: pytest.CaptureFixture[str], write_recipe: Callable[..., Path]) -> None:
    path = write_recipe(('"--max-running-requests", "16"', '"--max-running-requests", "sixteen"'))
    code, text = run(capsys, "validate", str(path), "--cluster", str(CLUSTER4))
    assert code == 1
    line = line_of(path, '"sixteen"')
    assert (f"recipe.toml:{line}:31: error: args[22]: --max-running-requests sixteen: SGLang "
            "0.5.23 takes an integer") in text


def test_validate_names_the_config_files_line_and_key(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The console's config.toml is checked as recipes are: an unknown key or binding id at its
    file, line and key, with a did-you-mean; validate then fails, with or without recipes."""
    from sparktui.config import config_dir

    folder = config_dir()
    folder.mkdir(parents=True)
    config = folder / "config.toml"
    config.write_text('theme = "sparktui-light"\n[keys]\nrestrat = "x"\n[logs]\nwindw = 500\n')
    code, text = run(capsys, "validate")
    assert code == 1
    assert f"{config}:3:1: error: keys.restrat: unknown binding id 'restrat'; did you mean 'restart'?" in text
    assert f"{config}:5:1: error: logs.windw: unknown key 'windw'; did you mean 'window'?" in text
    assert "2 error(s)" in text
    code, text = run(capsys, "validate", str(SEED), "--cluster", str(CLUSTER4))
    assert code == 1 and "valid for cluster 'sparks'" in text and "unknown binding id" in text
    config.write_text('[keys]\nrestart = "R"\n')
    assert run(capsys, "validate") == (0, f"✓ {config}: valid")
    monkeypatch.setenv("SPARKTUI_LOGS__WINDOW", "10")
    code, text = run(capsys, "validate")
    assert code == 1 and "$SPARKTUI_LOGS__WINDOW: error: logs.window:" in text


def test_validate_without_a_config_file_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "validate")
    assert code == 0 and "config.toml: the console uses its defaults" in text
