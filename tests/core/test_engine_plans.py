"""Every shipped recipe's plan held against the engines' own flag tables on every CI run: each
rank's command line parses flag by flag, and the parallel sizes the engine would read pass its
own rules (SGLang's ``check_server_args``: tp_size * pp_size divisible by nnodes; vLLM's
engine args: the world divisible by nnodes, at least one worker a node). The same lines go
through the real parsers in ``tests/engines`` (``-m engines``)."""

from __future__ import annotations

from typing import Any

import pytest

from sparktui.core.engines.argv import value_problem, walk
from sparktui.core.engines.flagtable import FlagTable, load
from tests.engines.plans import RANK_LINES, RankLine


def parsed(table: FlagTable, argv: list[str]) -> dict[str, Any]:
    """The fields the parser would set: the last use of each flag wins, as in argparse."""
    fields: dict[str, Any] = {f.dest: f.default for f in table.flags}
    for use in walk(table, argv):
        assert use.flag is not None, f"{use.spelling} is not a flag of {table.label}"
        assert not use.missing, f"{use.spelling} has no value"
        for _, value in use.values:
            assert value_problem(use.flag, value) is None, f"{use.spelling} {value}"
        if use.flag.kind == "int" and use.values:
            fields[use.flag.dest] = int(use.values[-1][1])
    return fields


def test_every_shipped_recipe_is_here() -> None:
    assert {line.recipe for line in RANK_LINES} == {"demo-tp4", "demo-vllm-tp4", "dsv41-flash-4x-mia"}


@pytest.mark.parametrize("line", RANK_LINES, ids=lambda line: line.id)
def test_the_plan_passes_the_engines_parallel_rules(line: RankLine) -> None:
    table = load(line.engine)
    assert table is not None
    f = parsed(table, line.argv)
    assert f["nnodes"] == 4 and f["node_rank"] == line.rank
    if line.engine == "sglang":
        assert f["tp_size"] == 4
        assert (f["tp_size"] * f["pp_size"]) % f["nnodes"] == 0
    else:
        assert f["tensor_parallel_size"] == 4
        world = f["pipeline_parallel_size"] * f["tensor_parallel_size"] * \
            f["prefill_context_parallel_size"]
        assert (f["data_parallel_size"] * world) % f["nnodes"] == 0
        assert world // f["nnodes"] > 0  # workers a node
