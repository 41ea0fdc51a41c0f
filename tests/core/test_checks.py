"""Boot checks per rank, from the plan's [boot] table."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sparktui.core.checks import BootChecks
from sparktui.core.cluster import local_cluster
from sparktui.core.engines import engine
from sparktui.core.plan import build_plan
from sparktui.core.recipe import load_recipe
from tests.conftest import RECIPES, SEED


def seed_checks() -> BootChecks:
    plan = build_plan(load_recipe(SEED), local_cluster(4))
    return BootChecks.from_plan(plan.boot, plan.world, engine(plan.engine).request_line)


def by_pattern(bc: BootChecks, start: str):  # type: ignore[no-untyped-def]
    return next(c for c in bc.checks if c.pattern.startswith(start))


def test_rank0_only_line() -> None:
    bc = seed_checks()
    check = by_pattern(bc, "max_total_num_tokens")
    line = ("[2026-09-25 12:00:01 TP0] max_total_num_tokens=8000000, chunked_prefill_size=4096, "
            "max_prefill_tokens=16384, max_running_requests=16, context_len=1048576")
    assert bc.feed(1, [(7, line)]) == []  # not a rank-1 check
    (update,) = bc.feed(0, [(7, line)])
    assert update.check is check and update.state == "passed"
    assert update.match is not None and update.match.line_no == 7
    assert bc.overall(check) == "passed"


def test_all_ranks_line_needs_every_rank() -> None:
    bc = seed_checks()
    check = by_pattern(bc, "RoCEnante")
    for r in range(3):
        bc.feed(r, [(1, f"RoCEnante ready: world=4 hcas=rocep1s0f0 rank={r}")])
    assert bc.overall(check) == "pending"
    bc.feed(3, [(9, "RoCEnante ready: world=4 hcas=rocep1s0f0")])
    assert bc.overall(check) == "passed"


def test_any_rank_line_counts_for_every_rank_summary() -> None:
    bc = seed_checks()
    before = bc.rank_summary(2)
    bc.feed(0, [(3, "DSV41 hc_fused: first call (4096 rows) bit-identical to stock")])
    after = bc.rank_summary(2)
    assert after["passed"] == before["passed"] + 1


def test_must_not_show_fails_and_is_fatal() -> None:
    bc = seed_checks()
    updates = bc.feed(2, [(40, "Traceback (most recent call last):")])
    assert [u.state for u in updates] == ["failed"]
    fatal = bc.fatal(2)
    assert fatal is not None and fatal.line_no == 40
    assert bc.fatal(1) is None


def test_finish_fails_missing_lines_and_late_lines_still_pass() -> None:
    bc = seed_checks()
    bc.finish(0)
    check = by_pattern(bc, "DSV41 hc_fused")
    assert bc.status[(check.id, 0)].state == "failed"
    bc.feed(0, [(99, "DSV41 hc_fused: first call (4096 rows) bit-identical to stock")])
    assert bc.status[(check.id, 0)].state == "passed"
    nms = next(c for c in bc.checks if c.kind == "must_not_show")
    assert bc.status[(nms.id, 0)].state == "passed"


def test_reset_after_restart() -> None:
    bc = seed_checks()
    bc.feed(1, [(1, "Traceback (most recent call last):")])
    bc.reset(1)
    assert bc.fatal(1) is None


def test_added_check_over_captured_lines() -> None:
    bc = seed_checks()
    check = bc.add("must_show", "re:NCCL version \\d+", "any", added=True)
    updates = bc.feed(3, [(1, "noise"), (2, "NCCL version 2.27.3+cuda13.0")], only=check)
    assert [(u.rank, u.match.line_no if u.match else None) for u in updates] == [(3, 2)]


def test_demo_recipe_loads() -> None:
    recipe = load_recipe(RECIPES / "demo-tp4" / "recipe.toml")
    plan = build_plan(recipe, local_cluster(4))
    assert plan.served_model_name == "demo-tp4"
    assert len(plan.boot.must_show) == 4


ATOMS = ["a", "b", " ", "^", "$", r"\b", r"\B", ".", ".*", "a+", "[ab]", r"\s", r"\S*", "(?=a)", "(?!b)",
         "(?<=a)", "(?<!b)", r"\A", r"\Z", "(a|b )", r"(a)\1", "(?s).", "(?i)A"]


@settings(max_examples=400, deadline=None)
@given(atoms=st.lists(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=4), min_size=1, max_size=3),
       lines=st.lists(st.text(alphabet="ab xA", max_size=8), min_size=2, max_size=8),
       must_not=st.booleans())
def test_a_batch_finds_what_its_lines_find_one_by_one(atoms: list[list[str]], lines: list[str],
                                                      must_not: bool) -> None:
    """The whole-batch pre-search never hides a match a per-line search would find."""
    patterns = ["re:" + "".join(parts) for parts in atoms]
    kind = "must_not_show" if must_not else "must_show"

    def checks() -> BootChecks:
        bc = BootChecks(1)
        for pattern in patterns:
            try:
                bc.add(kind, pattern, "all")
            except ValueError:  # e.g. a lookbehind of variable width
                assume(False)
        return bc

    numbered = list(enumerate(lines, 1))
    at_once = [(u.check.id, u.state, u.match) for u in checks().feed(0, numbered)]
    one_by_one = checks()
    singly = [(u.check.id, u.state, u.match) for ln in numbered for u in one_by_one.feed(0, [ln])]
    assert sorted(at_once, key=str) == sorted(singly, key=str)
