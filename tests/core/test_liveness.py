"""The recipe's ``[liveness]`` table: parsed into the plan, errors at their line; the canary's
record read back from a run's events."""

from __future__ import annotations

import pytest

from sparktui.core.canary import CanaryRecord, canary_state
from sparktui.core.cluster import local_cluster
from sparktui.core.engines import engine
from sparktui.core.errors import RecipeError
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe_text

BASE = """\
engine = "sglang"
docker_image = "sparktui-demo:latest"
model = "sparktui/demo-model"
required_nodes = 2
tensor_parallel_size = 2
"""


def test_liveness_goes_into_the_plan_and_not_into_its_hash() -> None:
    cluster = local_cluster(2)
    without = build_plan(load_recipe_text(BASE), cluster)
    assert without.liveness is None and "liveness" not in without.to_json()
    plan = build_plan(load_recipe_text(BASE + '[liveness]\nevery = "2s"\ntimeout = 1\n'), cluster)
    assert plan.liveness is not None
    assert (plan.liveness.every_s, plan.liveness.timeout_s, plan.liveness.max_tokens) == (2.0, 1.0, 1)
    assert plan.to_json()["liveness"] == {"every_s": 2.0, "timeout_s": 1.0, "max_tokens": 1}
    assert plan.plan_hash == without.plan_hash  # asked of a running group; not what runs
    defaults = build_plan(load_recipe_text(BASE + "[liveness]\n"), cluster).liveness
    assert defaults is not None and (defaults.every_s, defaults.timeout_s) == (60.0, 30.0)


@pytest.mark.parametrize(("table", "says"), [
    ('every = "soon"', "bad duration 'soon'"),
    ("max_tokens = 0", "greater than or equal to 1"),
    ('timeot = "1s"', "timeout"),  # did you mean
])
def test_a_bad_liveness_value_is_an_error_at_its_line(table: str, says: str) -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe_text(BASE + "[liveness]\n" + table + "\n")
    problems = err.value.problems
    assert len(problems) == 1 and problems[0].line == 7, problems
    assert says in problems[0].message and "liveness" in (problems[0].key or ""), problems[0]


def test_each_engine_asks_its_own_completion() -> None:
    sglang = engine("sglang").completion("m", 1)
    assert sglang.path == "/generate" and sglang.body["sampling_params"] == {"max_new_tokens": 1,
                                                                             "temperature": 0}
    assert engine("sglang").completion_text({"text": "OK", "meta_info": {}}) == "OK"
    vllm = engine("vllm").completion("served", 3)
    assert vllm.path == "/v1/completions" and vllm.body["model"] == "served" and vllm.body["max_tokens"] == 3
    assert engine("vllm").completion_text({"choices": [{"text": "OK"}]}) == "OK"
    for answer in (None, [], {"choices": []}, {"object": "error"}):
        assert engine("vllm").completion_text(answer) is None
        assert engine("sglang").completion_text(answer) is None


def test_the_canary_state_is_read_back_from_the_events() -> None:
    ok = {"kind": "canary", "ok": True, "at": 100.0, "latency_ms": 12.5, "why": None, "failures": 0}
    bad = {"kind": "canary", "ok": False, "at": 110.0, "latency_ms": None,
           "why": "POST /generate on n0:30000: timed out after 1 s", "failures": 2}
    state = canary_state([ok, bad, {"kind": "wedged", "reason": "x"}])
    assert state.wedged and state.last == CanaryRecord(False, 110.0, None, bad["why"], 2)
    assert state.sentence(now=115.0) == ("canary failed 5s ago (2 in a row): POST /generate on "
                                         "n0:30000: timed out after 1 s; the group is wedged")
    assert not canary_state([bad, {"kind": "wedged"}, {"kind": "restart", "rank": 0}]).wedged
    assert not canary_state([{"kind": "wedged"}, {"kind": "unwedged"}]).wedged
    assert canary_state([ok]).sentence(now=160.0) == "canary 12 ms, 1m ago"
    assert canary_state([{"kind": "canary", "ok": "yes"}]).last is None  # a damaged record
    assert canary_state([]).sentence() is None
