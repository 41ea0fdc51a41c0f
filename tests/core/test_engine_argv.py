"""Args read as the engines' own parsers read them, through the shipped tables: spellings
(aliases, abbreviations, vLLM's underscores and its hidden --no- forms), how many values each
flag takes, and which values the parser refuses."""

from __future__ import annotations

import pytest

from sparktui.core.engines.argv import serves_engine, value_problem, walk
from sparktui.core.engines.flagtable import load


def dests(engine: str, args: list[str]) -> list[tuple[str, str | None, list[str]]]:
    table = load(engine)
    assert table is not None
    return [(u.spelling, u.flag.dest if u.flag else None, [v for _, v in u.values])
            for u in walk(table, args)]


def test_vllm_spellings_its_parser_answers_to() -> None:
    """EnableDisableAction registers --no-enable-x but drops it from option_strings: the table
    keeps every registered spelling."""
    assert dests("vllm", ["--no-enable-prefix-caching", "--disable-prefix-caching",
                          "--max_num_seqs", "16", "--compilation-config.level", "3", "-tp", "4"]) == [
        ("--no-enable-prefix-caching", "enable_prefix_caching", []),
        ("--disable-prefix-caching", "enable_prefix_caching", []),
        ("--max_num_seqs", "max_num_seqs", ["16"]),
        ("--compilation-config.level", "compilation_config", ["3"]),
        ("-tp", "tensor_parallel_size", ["4"]),
    ]


def test_values_up_to_the_next_flag() -> None:
    assert dests("sglang", ["--lora-paths", "a", "b", "--random-seed", "-1", "--enable-lora"]) == [
        ("--lora-paths", "lora_paths", ["a", "b"]),
        ("--random-seed", "random_seed", ["-1"]),
        ("--enable-lora", "enable_lora", []),
    ]


def test_abbreviations_as_argparse_takes_them() -> None:
    table = load("sglang")
    assert table is not None
    assert table.resolve("--tp")[0] == table.option("--tp-size")
    flag, matched = table.resolve("--mamba")
    assert flag is None and len(matched) > 1
    assert table.resolve("--enable-foo") == (None, ())


@pytest.mark.parametrize(("engine", "option", "value", "why"), [
    ("sglang", "--max-running-requests", "sixteen", "an integer"),
    ("sglang", "--max-running-requests", "{{nnodes}}", None),
    ("sglang", "--mem-fraction-static", "0.8", None),
    ("sglang", "--mem-fraction-static", "most", "a number"),
    ("vllm", "--max-model-len", "32k", None),
    ("vllm", "--max-model-len", "long", "an integer (such as 4096, 4k or 2M)"),
    ("vllm", "--dtype", "float17", "one of auto, bfloat16, float, float16, float32, half"),
])
def test_value_problems(engine: str, option: str, value: str, why: str | None) -> None:
    table = load(engine)
    assert table is not None
    flag = table.option(option)
    assert flag is not None
    assert value_problem(flag, value) == why


@pytest.mark.parametrize(("engine", "entrypoint", "checked"), [
    ("sglang", ["python3", "-m", "sglang.launch_server"], True),
    ("sglang", None, True),
    ("sglang", ["python3", "-m", "sparktui.demo.engine"], True),
    ("sglang", ["sh", "-c", "exec python3 -m sglang.launch_server \"$@\"", "x"], False),
    ("sglang", ["python3", "/opt/boot.py"], False),
    ("vllm", ["vllm", "serve"], True),
    ("vllm", ["/usr/local/bin/vllm", "serve"], True),
    ("vllm", ["python", "-m", "vllm.entrypoints.openai.api_server"], True),
    ("vllm", ["python3", "-m", "sglang.launch_server"], False),
])
def test_which_entrypoints_get_the_engines_parser(engine: str, entrypoint: list[str] | None,
                                                  checked: bool) -> None:
    assert serves_engine(engine, entrypoint) is checked
