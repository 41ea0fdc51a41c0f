"""The demo engine's dumps of its arguments: what sparktui reads back from the stand-in is
the real engines' format, built from the shipped flag tables (fields.json kept in step), and its
clamp and drop switches make a flag that did not take effect."""

from __future__ import annotations

import importlib.util

from sparktui.core.argscheck import ArgsJudge
from sparktui.demo import config, sglang, vllm
from tests.conftest import ROOT

SGLANG_ARGV = ["--model-path", "m", "--nnodes", "4", "--node-rank", "2", "--dist-init-addr",
               "127.0.0.1:5000", "--max-running-requests", "16", "--trust-remote-code",
               "--tp-size", "4", "--mem-fraction-static", "0.80", "--enable-foo"]


def test_fields_json_is_what_the_script_writes_from_the_shipped_tables() -> None:
    spec = importlib.util.spec_from_file_location("demo_fields", ROOT / "scripts" / "demo_fields.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "sparktui" / "demo" / "fields.json").read_text() == module.fields_json(), \
        "run: python scripts/demo_fields.py"


def test_sglang_dump_has_every_field_and_the_flags_applied() -> None:
    cfg = config.parse_config(SGLANG_ARGV, env={})
    line = sglang.dump(cfg, {})
    assert line is not None and line.startswith("server_args=ServerArgs(") and len(line) > 10_000
    report = ArgsJudge("sglang", tuple(SGLANG_ARGV)).judge(line)
    assert report is not None
    assert [f.flag for f in report.flags if f.verdict != "took effect"] == ["--enable-foo"]


def test_clamp_and_drop_on_one_rank() -> None:
    cfg = config.parse_config(SGLANG_ARGV, env={})
    env = {"SPARKTUI_DEMO_CLAMP": "max_running_requests=13@2", "SPARKTUI_DEMO_DROP": "trust_remote_code"}
    line = sglang.dump(cfg, env)
    assert line is not None
    report = ArgsJudge("sglang", tuple(SGLANG_ARGV)).judge(line)
    assert report is not None
    off = {f.flag: (f.verdict, f.given, f.reported) for f in report.flags if f.verdict != "took effect"}
    assert off == {"--max-running-requests": ("differs", "16", "13"),
                   "--trust-remote-code": ("unknown", "true", None),
                   "--enable-foo": ("unknown", "true", None)}
    other = config.parse_config([*SGLANG_ARGV[:5], "1", *SGLANG_ARGV[6:]], env={})
    assert "max_running_requests=16," in (sglang.dump(other, env) or "")  # rank 1: not clamped


def test_vllm_dump_holds_only_what_differs_from_the_defaults() -> None:
    argv = ["--model", "m", "--max-num-seqs", "16", "--enforce-eager", "--gpu-memory-utilization",
            "0.92", "--tensor-parallel-size", "4"]
    line = vllm.dump(config.parse_config(argv, env={}), {})
    assert line is not None and line.startswith("non-default args: {")
    assert "gpu_memory_utilization" not in line  # vLLM's default
    report = ArgsJudge("vllm", tuple(argv)).judge(line)
    assert report is not None and report.passed, report.summary()
    gpu = next(f for f in report.flags if f.flag == "--gpu-memory-utilization")
    assert gpu.note == "absent: equals the default"
