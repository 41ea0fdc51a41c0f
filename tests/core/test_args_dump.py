"""Did every flag take effect: the engines' real dumps of their arguments (made with SGLang
0.5.23 and vLLM 0.33.0, tests/data/fixtures/engines) read without eval and held against every
flag of the seed's plan; what cannot be read is "not reported" with a reason, never an error."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.argscheck import ArgsJudge
from sparktui.core.checks import BootChecks, args_judge
from sparktui.core.cluster import load_cluster_text
from sparktui.core.engines.reprread import MAX_DEPTH, MAX_TEXT, Call, EnumValue, Raw, ReprError, read
from sparktui.core.errors import RecipeError
from sparktui.core.plan import Plan, build_plan
from sparktui.core.recipe import load_recipe, load_recipe_text
from sparktui.core.redact import MASK
from tests.conftest import ROOT, SEED

FIXTURES = ROOT / "tests" / "data" / "fixtures" / "engines"
SGLANG = (FIXTURES / "sglang-0.5.23-seed-rank1.txt").read_text().strip()
VLLM = (FIXTURES / "vllm-0.33.0-non-default.txt").read_text().strip()
SGLANG_PREFIX = "[2026-12-01 12:00:00] "  # SGLang's logger (configure_logger), rank 1: no TP tag
VLLM_PREFIX = "(APIServer pid=123) INFO 12-01 12:00:00 [startup.py:96] "


def seed_plan(head: str = "10.0.0.1") -> Plan:
    """The seed on tests/data/cluster-4.toml, its head's fabric address the fixture's."""
    text = (ROOT / "tests" / "data" / "cluster-4.toml").read_text()
    return build_plan(load_recipe(SEED), load_cluster_text(text.replace("192.168.200.1", head)))


@cache
def rank1_judge() -> ArgsJudge:
    return args_judge(seed_plan(), 1)


def test_the_seeds_sglang_dump_holds_every_flag_of_its_plan() -> None:
    plan = seed_plan()
    judge = args_judge(plan, 1)
    report = judge.judge(SGLANG_PREFIX + SGLANG)
    assert report is not None and report.reported, report
    flags = [t for t in plan.ranks[1].container.command if t.startswith("--")]
    assert [f.flag for f in report.flags] == flags  # every flag of the rank's command line
    assert all(f.verdict == "took effect" for f in report.flags), report.summary()
    assert report.passed and report.summary() == f"args {len(flags)}/{len(flags)} took effect"
    by = {f.field: f for f in report.flags}
    assert by["max_running_requests"].reported == "16" and by["trust_remote_code"].given == "true"
    assert by["mem_fraction_static"].given == "0.80" and by["mem_fraction_static"].reported == "0.8"
    if "--tp-size" in flags:  # the launcher's TP flag (issue 24's other part) took effect too
        assert by["tp_size"].verdict == "took effect"
    assert report.version is None and report.table == "0.5.23"  # SGLang prints no version


def test_a_flag_the_engine_changed_differs_with_both_values() -> None:
    plan = seed_plan()
    line = SGLANG.replace("max_running_requests=16,", "max_running_requests=13,")
    report = args_judge(plan, 1).judge(SGLANG_PREFIX + line)
    assert report is not None and not report.passed
    (off,) = [f for f in report.flags if f.verdict != "took effect"]
    assert (off.field, off.given, off.reported) == ("max_running_requests", "16", "13")
    assert report.summary().endswith("1 differs: max_running_requests 16 -> 13")


def test_an_unknown_flag_and_an_expected_difference() -> None:
    seed = SEED.read_text().replace('"--watchdog-timeout", "1800",',
                                    '"--watchdog-timeout", "1800", "--enable-foo",')
    seed = seed.replace("[boot]", '[boot]\nargs_expected = ["--max-running-requests"]', 1)
    text = (ROOT / "tests" / "data" / "cluster-4.toml").read_text().replace("192.168.200.1", "10.0.0.1")
    plan = build_plan(load_recipe_text(seed), load_cluster_text(text))
    line = SGLANG.replace("max_running_requests=16,", "max_running_requests=13,")
    report = args_judge(plan, 1).judge(line)
    assert report is not None and not report.passed
    foo = next(f for f in report.flags if f.flag == "--enable-foo")
    assert foo.verdict == "unknown" and foo.failing and "sglang 0.5.23" in foo.note
    mrr = next(f for f in report.flags if f.flag == "--max-running-requests")
    assert mrr.verdict == "differs" and mrr.expected and not mrr.failing
    assert "max_running_requests 16 -> 13 (expected)" in report.summary()
    assert "1 unknown: --enable-foo" in report.summary()


def test_vllms_dict_default_absent_and_a_masked_key() -> None:
    """vLLM prints what differs from its defaults, the API key as '***': the key is present
    (not compared, never shown), a flag set to its default is absent and said so."""
    command = ("--served-model-name", "demo-vllm", "--enforce-eager", "--max-num-seqs", "16",
               "--api-key", "sk-secret-value-1", "--tensor-parallel-size", "4",
               "--gpu-memory-utilization", "0.92", "--model", "m", "--host", "0.0.0.0",
               "--nnodes", "4", "--master-addr", "10.0.0.1", "--master-port", "25000")
    judge = ArgsJudge("vllm", command, secret_at=frozenset({command.index("sk-secret-value-1")}))
    version_line = "(APIServer pid=123) INFO 12-01 12:00:00 [startup.py:95] vLLM server version " \
                   "0.33.0, serving model m"
    assert judge.version(version_line) == "0.33.0"
    report = judge.judge(VLLM_PREFIX + VLLM, "0.33.0")
    assert report is not None and report.version == "0.33.0" and report.table == "0.33.0"
    by = {f.flag: f for f in report.flags}
    key = by["--api-key"]
    assert key.verdict == "took effect" and key.given == MASK and key.reported == MASK
    assert "sk-secret" not in repr(report.to_json()) + report.summary()
    gpu = by["--gpu-memory-utilization"]
    assert gpu.verdict == "took effect" and gpu.note == "absent: equals the default"
    model = by["--model"]  # absent from the fixture's dict, and not vLLM's default
    assert model.verdict == "differs" and "default" in model.note
    assert all(by[f].verdict == "took effect" for f in (
        "--served-model-name", "--enforce-eager", "--max-num-seqs", "--tensor-parallel-size",
        "--host", "--nnodes", "--master-addr", "--master-port"))


def test_a_secret_printed_in_clear_is_compared_and_never_shown() -> None:
    judge = ArgsJudge("sglang", ("--api-key", "sk-right-one"), secret_at=frozenset({1}))
    right = judge.judge("server_args=ServerArgs(api_key='sk-right-one')")
    wrong = judge.judge("server_args=ServerArgs(api_key='sk-wrong-one')")
    assert right is not None and right.flags[0].verdict == "took effect"
    assert wrong is not None and wrong.flags[0].verdict == "differs"
    for r in (right, wrong):
        assert "sk-" not in repr(r.to_json()) + r.summary()


def test_reprs_with_enums_quotes_unicode_nesting_and_the_unknown() -> None:
    text = ("server_args=ServerArgs(a='it\\'s \"q\" \\u00e9\\U0001f600\\x41\\n', b=\"don't\", "
            "c=None, d=[1, -2.5e-3, (3,), {'k': {'n': [True, False]}}], e=<LoadFormat.AUTO: 'auto'>, "
            "f=<function f at 0x7f00>, g=torch.bfloat16, h={1, 2}, i=PosixPath('/x'), j=inf, "
            "k=b'\\x00', l=r'\\d+', m='''tri'ple''', n=1+2j, o=set(), p=-inf, q='日本語')")
    value, end = read(text, len("server_args="))
    assert end == len(text) and isinstance(value, Call) and value.name == "ServerArgs"
    v = value.kwargs
    assert v["a"] == "it's \"q\" é😀A\n" and v["b"] == "don't" and v["c"] is None
    assert v["d"] == [1, -2.5e-3, (3,), {"k": {"n": [True, False]}}]
    assert v["e"] == EnumValue("LoadFormat.AUTO", "auto")
    assert v["f"] == Raw("<function f at 0x7f00>") and v["g"] == Raw("torch.bfloat16")
    assert v["h"] == [1, 2] and v["i"] == Call("PosixPath", ("/x",), {})
    assert v["j"] == float("inf") and v["k"] == "\x00" and v["l"] == "\\d+"
    assert v["m"] == "tri'ple" and v["n"] == Raw("1+2j") and v["p"] == float("-inf")
    assert v["q"] == "日本語"
    judge = ArgsJudge("sglang", ("--load-format", "auto", "--dtype", "bfloat16"))
    report = judge.judge("server_args=ServerArgs(load_format=<LoadFormat.AUTO: 'auto'>, "
                         "dtype=torch.bfloat16)")
    assert report is not None and report.passed, report


def test_sglang_0_5_23s_dict_form_reads_the_same() -> None:
    """SGLang's engine entry logs ``server_args={...}`` (resolved_dict) where the fixture's
    launch logged the repr: the same fields either way."""
    _call, _ = read(SGLANG, len("server_args="))
    assert isinstance(_call, Call)
    as_dict = "server_args=" + repr(dict(_call.kwargs))
    report = args_judge(seed_plan(), 1).judge(SGLANG_PREFIX + as_dict)
    assert report is not None and report.passed, report.summary()


def test_malformed_truncated_huge_or_deep_dumps_are_not_reported_with_a_reason() -> None:
    judge = args_judge(seed_plan(), 1)
    cases = {
        "cut off": SGLANG[: len(SGLANG) // 2],
        "unterminated string": "server_args=ServerArgs(model_path='abc",
        "more than": "server_args=ServerArgs(x='" + "a" * (MAX_TEXT + 10) + "')",
        "nested deeper": "server_args=ServerArgs(x=" + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + ")",
        "not a dict or a call": "server_args=42",
    }
    for reason, line in cases.items():
        report = judge.judge(line)
        assert report is not None and not report.reported and not report.passed, reason
        assert reason in report.reason, (reason, report.reason)
        assert report.summary().startswith("args not reported: the dump could not be read")
    assert judge.judge("no dump here") is None


def test_the_args_check_per_rank_in_boot_checks() -> None:
    """One args check per rank, decided by its dump line; a rank without one fails as not
    reported at the boot's end; a dump that comes after still decides it."""
    plan = seed_plan()
    bc = BootChecks.for_plan(plan)
    args = [c for c in bc.checks if c.kind == "args"]
    assert [c.ranks for c in args] == [[0], [1], [2], [3]]
    (update,) = bc.feed(1, [(41, SGLANG_PREFIX + SGLANG)])
    assert update.state == "passed" and update.match is not None and update.match.line_no == 41
    assert update.match.text.startswith("args ") and "took effect" in update.match.text
    bc.finish(2)
    report = bc.report(2)
    assert bc.status[(args[2].id, 2)].state == "failed" and report is not None
    assert report.summary() == "args not reported: no dump of the arguments by the end of the boot"
    line = SGLANG.replace("node_rank=1,", "node_rank=2,")
    (late,) = bc.feed(2, [(99, line)])
    assert late.state == "passed"


def test_args_warn_and_ignore() -> None:
    seed = SEED.read_text()
    text = (ROOT / "tests" / "data" / "cluster-4.toml").read_text().replace("192.168.200.1", "10.0.0.1")
    cluster = load_cluster_text(text)
    warn = build_plan(load_recipe_text(seed.replace("[boot]", '[boot]\nargs = "warn"', 1)), cluster)
    bc = BootChecks.for_plan(warn)
    (u,) = bc.feed(1, [(1, SGLANG.replace("max_running_requests=16,", "max_running_requests=13,"))])
    assert u.state == "passed" and u.match is not None and "1 differs" in u.match.text
    ignore = build_plan(load_recipe_text(seed.replace("[boot]", '[boot]\nargs = "ignore"', 1)), cluster)
    assert not [c for c in BootChecks.for_plan(ignore).checks
                if c.kind == "args"]
    assert seed_plan().plan_hash == build_plan(load_recipe(SEED), cluster).plan_hash
    assert warn.plan_hash != seed_plan().plan_hash  # the mode is part of what decides a boot


def test_a_bad_args_mode_is_refused_with_did_you_mean(tmp_path: Path) -> None:
    bad = SEED.read_text().replace("[boot]", '[boot]\nargs = "chek"', 1)
    with pytest.raises(RecipeError) as caught:  # the recipe error with the file's line
        load_recipe_text(bad)
    assert "boot.args: " in str(caught.value) and "did you mean 'check'?" in str(caught.value)
    typo = SEED.read_text().replace("[boot]", '[boot]\nargs_expect = ["--x"]', 1)
    with pytest.raises(RecipeError) as caught:
        load_recipe_text(typo)
    assert "did you mean 'args_expected'?" in str(caught.value)


MUTATIONS = st.lists(st.tuples(st.integers(0, len(SGLANG) - 1),
                               st.sampled_from(["", "'", '"', "(", ")", "[", "]", "{", "}", "<", ">",
                                                ",", "=", ":", "\\", "\\u12", "\x00", "é", "<A.B: "])),
                     max_size=6)


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, len(SGLANG)), edits=MUTATIONS)
def test_truncated_or_mutated_sglang_dumps_never_raise(cut: int, edits: list[tuple[int, str]]) -> None:
    text = SGLANG
    for at, put in edits:
        text = text[:at] + put + text[at + 1:]
    text = text[:cut]
    report = rank1_judge().judge(text)
    assert report is None or report.reported or report.reason


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, len(VLLM)), junk=st.text(max_size=40), at=st.integers(0, len(VLLM)))
def test_truncated_or_mutated_vllm_dumps_never_raise(cut: int, junk: str, at: int) -> None:
    text = (VLLM[:at] + junk + VLLM[at:])[:cut]
    judge = ArgsJudge("vllm", ("--max-num-seqs", "16", "--enforce-eager"))
    report = judge.judge(text)
    assert report is None or report.reported or report.reason


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_after_the_marker_never_raises(text: str) -> None:
    try:
        _value, end = read("x=" + text, 2)
    except ReprError as exc:  # the one way it refuses, with a reason
        assert str(exc)
    else:
        assert 2 <= end <= len(text) + 2


def test_fixture_is_what_the_readme_says() -> None:
    assert 16_000 < len(SGLANG) < 17_500 and re.match(r"server_args=ServerArgs\(", SGLANG)


def test_a_dump_cut_into_pieces_by_the_log_pump_is_read_whole() -> None:
    """Lines over the pump's cap arrive as pieces (``↪ `` before each but the first): the
    args check joins them; a first piece whose rest never comes fails with the cut as reason."""
    from sparktui.agents.local_shim import LineCutter

    plan = seed_plan()
    pieces = LineCutter(4096).feed((SGLANG_PREFIX + SGLANG + "\n").encode())
    assert len(pieces) > 3
    bc = BootChecks.for_plan(plan)
    updates = bc.feed(1, list(enumerate(pieces, 1)))
    assert [u.state for u in updates] == ["passed"], bc.report(1)
    report = bc.report(1)
    assert report is not None and report.passed and report.flags
    assert bc.feed(3, [(1, pieces[0].replace("node_rank=1,", "node_rank=3,"))]) == []
    (end,) = [u for u in bc.finish(3) if u.check.kind == "args"]
    cut = bc.report(3)
    assert end.state == "failed" and cut is not None and "cut off after" in cut.reason


def test_an_abbreviated_flag_is_read_as_the_engines_parser_reads_it() -> None:
    """argparse takes a flag's unique prefix (both engines keep ``allow_abbrev``), and the
    recipe's lint reads ``--max-running 16`` so; the args check called it unknown."""
    line = SGLANG.replace("max_running_requests=16,", "max_running_requests=13,")
    report = ArgsJudge("sglang", ("--max-running", "13", "--chunked-prefill=4096")).judge(line)
    assert report is not None
    by = {f.flag: f for f in report.flags}
    assert by["--max-running"].field == "max_running_requests"
    assert by["--max-running"].verdict == "took effect", report.summary()
    assert by["--chunked-prefill"].field == "chunked_prefill_size"
