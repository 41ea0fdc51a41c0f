"""Every rank's command line of every shipped recipe, parsed by the real engine's own parser
(SGLang 0.5.23's ``prepare_server_args``, vLLM 0.33.0's ``make_arg_parser``) with its own
parallel-size rules. Needs the engines extra (``pip install '.[engines]'``, a CPU torch first);
skipped where the packages do not import, also under CI: it is the heavy check run by hand
whenever the flag tables are regenerated (docs/recipes.md records the last run)."""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

import pytest

from sparktui.core.engines.flagtable import load
from tests.engines.plans import RANK_LINES, RankLine

pytestmark = pytest.mark.engines


def _sglang() -> Any:
    try:
        from sglang.srt import server_args
    except Exception as exc:  # an import-time dependency missing is "not installed" too
        pytest.skip(f"SGLang does not import here ({type(exc).__name__}: {exc}); "
                    "pip install '.[engines]' to run this check")
    return server_args


def _vllm() -> tuple[Any, Any, Any]:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    try:
        from vllm.config import ParallelConfig
        from vllm.entrypoints.common.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except Exception as exc:
        pytest.skip(f"vLLM does not import here ({type(exc).__name__}: {exc}); "
                    "pip install '.[engines]' to run this check")
    return ParallelConfig, make_arg_parser, FlexibleArgumentParser


def _installed(engine: str) -> str:
    from importlib.metadata import version

    installed = version(engine)
    table = load(engine)
    assert table is not None and table.version == installed, (
        f"the newest shipped table of {engine} is {table and table.version}, the installed "
        f"{engine} is {installed}: regenerate with scripts/engine_flags.py")
    return installed


def _parse_or_fail(parse: Any, argv: list[str]) -> Any:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parse(argv)
    except SystemExit:  # argparse's refusal: its message is on stderr
        pytest.fail(f"the engine's parser refused {argv}: {err.getvalue().strip()}")


@pytest.mark.parametrize("line", [r for r in RANK_LINES if r.engine == "sglang"],
                         ids=lambda line: line.id)
def test_sglang_takes_the_rank_line(line: RankLine) -> None:
    server_args = _sglang()
    _installed("sglang")
    # prepare_server_args parses and builds the record; its check_server_args runs only after
    # resolve_once, which reads the model's config (a download), so its parallel-size rule is
    # asked here of SGLang's own resolving view, as check_server_args words it.
    from sglang.srt.arg_groups.model_override_base import resolving_view

    args = _parse_or_fail(server_args.prepare_server_args, line.argv)
    assert (args.tp_size, args.nnodes, args.node_rank) == (4, 4, line.rank)
    cfg = resolving_view(args)
    if cfg.ep_join_mode != "scale":
        assert (cfg.tp_size * cfg.pp_size) % cfg.nnodes == 0, \
            "tp_size must be divisible by number of nodes"


@pytest.mark.parametrize("line", [r for r in RANK_LINES if r.engine == "vllm"],
                         ids=lambda line: line.id)
def test_vllm_takes_the_rank_line(line: RankLine) -> None:
    parallel_config, make_arg_parser, flexible = _vllm()
    _installed("vllm")
    ns = _parse_or_fail(make_arg_parser(flexible()).parse_args, line.argv)
    assert (ns.tensor_parallel_size, ns.nnodes, ns.node_rank) == (4, 4, line.rank)
    # vLLM's own ParallelConfig computes the world (TP x PP x PCP) and each node's share of it;
    # create_engine_config refuses a world nnodes does not divide.
    config = parallel_config(
        tensor_parallel_size=ns.tensor_parallel_size, pipeline_parallel_size=ns.pipeline_parallel_size,
        data_parallel_size=ns.data_parallel_size, nnodes=ns.nnodes, node_rank=ns.node_rank)
    assert (config.world_size * config.data_parallel_size) % config.nnodes == 0
    assert config.world_size // config.nnodes > 0  # workers on this node
    assert config.local_world_size > 0
