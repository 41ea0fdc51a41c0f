"""Positions of keys, so every error can name its line."""

from __future__ import annotations

import pytest

from sparktui.core.errors import ConfigError
from sparktui.core.tomlsource import format_key, parse_toml
from tests.conftest import SEED

DOC = '''# comment
a = 1
"quoted key" = 'x'   # trailing
b.c = 2
list = [
  "one",   # 0
  """two
still two""",
  { p = "three", r = [0, 1] },
]

[t]
k = "v"

[[arr]]
x = 1

[[arr]]
x = 2
[arr.sub]
y = 3
'''


def test_positions() -> None:
    src = parse_toml(DOC)
    assert src.line_of(("a",)) == (2, 1)
    assert src.line_of(("quoted key",)) == (3, 1)
    assert src.line_of(("b", "c")) == (4, 1)
    assert src.line_of(("list", 0)) == (6, 3)
    assert src.line_of(("list", 1)) == (7, 3)
    assert src.line_of(("list", 2)) == (9, 3)
    assert src.line_of(("list", 2, "r")) == (9, 18)
    assert src.line_of(("t", "k")) == (13, 1)
    assert src.line_of(("arr", 0, "x")) == (16, 1)
    assert src.line_of(("arr", 1, "x")) == (19, 1)
    assert src.line_of(("arr", 1, "sub", "y")) == (21, 1)
    assert src.line_of(("t", "missing")) == (12, 1)  # falls back to the table


def test_seed_positions() -> None:
    text = SEED.read_text()
    lines = text.splitlines()
    src = parse_toml(text)
    line, _ = src.line_of(("env", "NCCL_PROTO"))
    assert line is not None and lines[line - 1].startswith("NCCL_PROTO")
    line, _ = src.line_of(("args", 41))
    assert line is not None and '"1800"' in lines[line - 1]
    line, _ = src.line_of(("boot", "must_show", 3, "ranks"))
    assert line is not None and "max_total_num_tokens" in lines[line - 1]


def test_syntax_error_names_line_and_column() -> None:
    with pytest.raises(ConfigError) as info:
        parse_toml('a = 1\nb = "unterminated\n')
    (problem,) = info.value.problems
    assert problem.line == 2 and problem.column is not None
    assert problem.message.startswith("TOML syntax error")


def test_format_key() -> None:
    assert format_key(("staging", 0, "min_free")) == "staging[0].min_free"
    assert format_key(("env", "a b")) == 'env."a b"'
