"""Failed checks as the CLI names them: kind, the ranks asked for, the pattern, where it failed;
outside text (patterns, log lines) printed verbatim, never read as markup."""

from __future__ import annotations

import io

from rich.console import Console

from sparktui.cli import render
from sparktui.core.checks import BootChecks


def printed(text: object) -> str:
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(text)
    return console.export_text().rstrip("\n")


def checks() -> BootChecks:
    bc = BootChecks(4)
    bc.add("ready", "fired up", [0])
    bc.add("must_show", "[red]armed[/red] ...", [1, 2])
    bc.add("must_show", "rendezvous ok", "all")
    bc.add("must_not_show", "Traceback", "all")
    for r in range(4):
        bc.feed(r, [(1, "rendezvous ok"), (2, "fired up" if r == 0 else "-")])
    bc.feed(1, [(3, "[red]armed[/red] x")])
    bc.feed(3, [(7, "Traceback [bold](most recent call last)")])
    for r in range(4):
        bc.finish(r)
    return bc


def test_each_failed_check_is_named_with_where_it_failed() -> None:
    bc = checks()
    assert render.checks_count(bc.to_json()) == "2/4 checks passed, 2 failed"
    assert [printed(t) for t in render.check_failures(bc.to_json())] == [
        "check failed: must_show (ranks 1,2): [red]armed[/red] ... · never appeared on rank 2",
        "check failed: must_not_show (ranks all): Traceback · appeared on rank 3 line 7: "
        "Traceback [bold](most recent call last)",
    ]


def test_json_lists_every_check_with_its_verdict_per_rank() -> None:
    by_pattern = {c["pattern"]: c for c in checks().to_json()}
    armed = by_pattern["[red]armed[/red] ..."]
    assert (armed["kind"], armed["ranks"], armed["state"], armed["failed_on"]) == (
        "must_show", [1, 2], "failed", [2])
    assert armed["per_rank"] == [
        {"rank": 1, "state": "passed", "line": 3, "text": "[red]armed[/red] x"},
        {"rank": 2, "state": "failed", "line": None, "text": None}]
    assert by_pattern["fired up"]["state"] == "passed"
    assert by_pattern["Traceback"]["failed_on"] == [3]
    assert render.checks_count(BootChecks(2).to_json()) == "0/0 checks passed"
