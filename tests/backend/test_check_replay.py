"""A reattach reaches the live run's check verdicts: the live Board records when boots ended
and which checks the operator added; a new Board replaying the run's files and events shows the
same counts. Real run files in tmp, no cluster (nothing here talks to a node)."""

from __future__ import annotations

from pathlib import Path

from sparktui.backend.board import Board, ended_boots
from sparktui.backend.follower import LogFollower
from sparktui.core.cluster import local_cluster
from sparktui.core.plan import Plan, build_plan
from sparktui.core.recipe import load_recipe
from sparktui.core.runstore import MARKER, Run, RunStore, utc_now
from sparktui.demo import sglang
from sparktui.demo.config import parse_config
from tests.conftest import RECIPES

BOOT = ["DEMO rendezvous ok: world=4 rank={r} peers=3", "Load weight end. type=Demo",
        "KV cache ready: #tokens=123456"]
HEAD = ["max_total_num_tokens=123456, chunked_prefill_size=4096, x max_running_requests=16",
        "The server is fired up and ready to roll!"]
NEVER = "DEMO added by the operator ..."


def plan() -> Plan:
    recipe = load_recipe(RECIPES / "demo-tp4" / "recipe.toml")
    return build_plan(recipe, local_cluster(4))


def dump_line(p: Plan, rank: int, env: dict[str, str] | None = None) -> str:
    """The rank's dump of its arguments, as the demo engine prints it for its command line."""
    cfg = parse_config(p.ranks[rank].container.command, env={})
    text = sglang.dump(cfg, env or {})
    assert text is not None
    return f"[2026-12-01 12:00:00 TP{rank}] {text}"


def board(p: Plan) -> tuple[Board, LogFollower]:
    b = Board(p, local_cluster(4).nodes, lambda _event: None)
    return b, LogFollower(b, {}, {})


def say(follower: LogFollower, rank: int, *lines: str) -> None:
    follower.ingest(follower.board.ranks[rank], [(utc_now(), line) for line in lines])


def live_boot(tmp_path: Path, dump_env: dict[str, str] | None = None
              ) -> tuple[Board, LogFollower, Run]:
    """Every rank up and ready (the boot ends), as the follower and the prober see it."""
    b, f = board(plan())
    run = RunStore(tmp_path).create("demo-tp4")
    b.run = run
    for info in b.ranks:
        info.container_id = f"c{info.rank}"
        b.set_state(info, "creating")
        b.set_state(info, "booting")
        say(f, info.rank, *[line.format(r=info.rank) for line in BOOT],
            dump_line(b.plan, info.rank, dump_env))
    say(f, 0, *HEAD)
    for info in b.ranks[1:]:
        b.set_health(info, 200)
    assert [i.state for i in b.ranks] == ["ready"] * 4
    return b, f, run


def counts(b: Board) -> dict[int, dict[str, int]]:
    return {r: b.checks.rank_summary(r) for r in range(4)}


async def reattached(run: Run, running: bool) -> Board:
    b, f = board(plan())
    for info in b.ranks:
        info.observe(f"c{info.rank}", running, None if running else 4)
    await f.replay_checks(run)
    return b


async def test_a_group_that_fell_apart_after_ready_replays_its_verdicts(tmp_path: Path) -> None:
    live, f, run = live_boot(tmp_path)
    await f.add_check(NEVER, "any")  # after the end: failed at once, as the others were
    say(f, 2, "RuntimeError: NCCL error: unhandled system error", "Traceback (most recent call last):")
    shown = counts(live)
    assert all(c["pending"] == 0 for c in shown.values())
    assert shown[2]["failed"] == 3  # the added check, NCCL error and Traceback

    assert counts(await reattached(run, running=False)) == shown  # every container exited
    assert counts(await reattached(run, running=True)) == shown  # still running, not ready yet


async def test_a_rank_restarted_since_the_end_boots_again(tmp_path: Path) -> None:
    live, f, run = live_boot(tmp_path)
    say(f, 1, "--- sparktui: rank 1 restarted by the operator (container c1 replaced) ---")
    run.event("restart", rank=1, old="c1", line=run.log(1).lines)  # as Orchestrator._replace
    live.checks.reset(1)
    say(f, 1, BOOT[0].format(r=1))
    shown = counts(live)
    assert shown[1]["pending"] > 0 and shown[0]["pending"] == 0
    assert counts(await reattached(run, running=True)) == shown


async def test_a_container_printing_the_restart_marker_changes_no_verdict(tmp_path: Path) -> None:
    """sparktui's marker text, printed by a rank's own container, is a line like any other: the
    run's events record no restart, so a reattach finds the checks where the live run left
    them (the marker's text once made the replay start the rank's checks over after it)."""
    live, f, run = live_boot(tmp_path)
    say(f, 2, f"{MARKER}rank 2 restarted by the operator (container c2 replaced) ---")
    shown = counts(live)
    assert all(shown[r]["pending"] == 0 and shown[r]["failed"] == 0 for r in range(4))
    again = await reattached(run, running=True)
    assert counts(again) == shown
    assert [i.restarts for i in again.ranks] == [0, 0, 0, 0]


def test_ended_boots_reads_ends_and_restarts_in_order() -> None:
    events = [{"kind": "boot-ended", "ranks": [2]}, {"kind": "restart", "rank": 2},
              {"kind": "boot-ended", "ranks": [3, 9]}, {"kind": "rank", "rank": 1}]
    assert ended_boots(events, 4) == {3}
    assert ended_boots([*events, {"kind": "ready"}, {"kind": "restart", "rank": 0}], 4) == {1, 2, 3}


async def test_a_container_that_exited_unwatched_ended_its_boot(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create("demo-tp4")
    for rank in range(4):  # lines caught up from containers nobody followed; no end recorded
        run.log(rank).append([(utc_now(), BOOT[0].format(r=rank))])
    b, f = board(plan())
    for info in b.ranks:
        info.observe(f"c{info.rank}", info.rank != 3, 4 if info.rank == 3 else None)
    await f.replay_checks(run)
    own = [st.state for (_cid, r), st in b.checks.status.items() if r == 3]
    assert "pending" not in own and "failed" in own
    assert all(b.checks.rank_summary(r)["pending"] > 0 for r in range(3))


HOSTILE = ['[2026-12-01 12:00:00] INFO:     10.9.9.9:4242 - "GET /x?Traceback (most recent call last): '
           'HTTP/1.1" 400 Bad Request',
           '[2026-12-01 12:00:00] INFO:     10.9.9.9:4243 - "GET /EngineDeadError HTTP/1.1" 404 Not Found',
           "[2026-12-01 12:00:00] Receive: obj=GenerateReqInput(text='DEMO added by the operator x')"]


async def test_request_lines_are_no_evidence_live_on_reattach_or_for_an_added_check(
        tmp_path: Path) -> None:
    """Requests whose text holds the recipe's must_not_show line, an engine fatal line and an
    added check's line, before and after the boot ended: every rank stays ready, every check
    passed, the added one fails (its line only came in a request); a reattach agrees, and the
    lines are in the run's files."""
    live, f, run = live_boot(tmp_path)
    before = counts(live)
    for rank in range(4):
        say(f, rank, *HOSTILE)
    await f.add_check(NEVER, "any")
    assert [i.state for i in live.ranks] == ["ready"] * 4
    shown = counts(live)
    assert shown == {r: {**c, "failed": 1} for r, c in before.items()}
    assert all(c["failed"] == 0 and c["pending"] == 0 for c in before.values())
    assert counts(await reattached(run, running=True)) == shown
    assert all(line in (run.dir / "r2.log").read_text() for line in HOSTILE)


async def test_a_flag_that_did_not_take_effect_is_replayed_on_reattach(tmp_path: Path) -> None:
    """Rank 2's engine clamped --max-running-requests: its args check failed live with both
    values; a new Board replaying the run's files gives every rank the same verdicts, and the
    run's events record them."""
    live, _f, run = live_boot(tmp_path, {"SPARKTUI_DEMO_CLAMP": "max_running_requests=13@2"})
    live.end_checks([0, 1, 2, 3])
    report = live.checks.report(2)
    assert report is not None and not report.passed
    assert "1 differs: max_running_requests 16 -> 13" in report.summary()
    assert all((r := live.checks.report(k)) is not None and r.passed for k in (0, 1, 3))
    again = await reattached(run, running=True)
    assert [again.checks.report(r) for r in range(4)] == [live.checks.report(r) for r in range(4)]
    assert counts(again) == counts(live)
    recorded = [e for e in run.events() if e["kind"] == "args"]
    assert {e["rank"]: e["state"] for e in recorded} == {0: "passed", 1: "passed", 2: "failed", 3: "passed"}
