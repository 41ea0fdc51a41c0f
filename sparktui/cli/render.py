"""Rich renderings for the terminal: problems, plans, the catalog, status and doctor tables.

What comes from outside (recipe and cluster values, node names, details, findings, log text,
check patterns, library errors) goes through ``plain``: ``Text``, never a markup string (Rich
parses markup in every plain ``str`` it prints, table cells and titles included), so a detail
holding ``[/red]`` prints as it is, and control characters show as ``\x1b`` instead of moving
the cursor or recolouring the terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sparktui.core.controls import visible
from sparktui.core.dockerview import short_id
from sparktui.core.kinds import kind_of
from sparktui.core.problems import Problem
from sparktui.core.rankstate import RankState, assert_never, by_state
from sparktui.core.units import format_bytes, format_duration

if TYPE_CHECKING:  # imported only by the verbs that need them (see sparktui.cli)
    from rich.progress import Progress

    from sparktui.backend.doctor import Finding
    from sparktui.catalog import RecipeInfo
    from sparktui.core.plan import Plan, RankPlan


def _state_style(state: RankState) -> str:
    match state:
        case "ready":
            return "green"
        case "failed":
            return "bold red"
        case "wedged":
            return "bold magenta"
        case "booting" | "creating":
            return "yellow"
        case "stopped" | "pending":
            return "dim"
        case "restarting":
            return "magenta"
        case "staging":
            return "cyan"
        case "queued":
            return "blue"
        case _:
            assert_never(state)


STATE_STYLE: dict[RankState, str] = by_state(_state_style)
"""A rank state's colour in ``status`` and ``up``'s progress lines."""
VERDICT_MARK = {"passed": ("✓", "green"), "warned": ("!", "yellow"), "failed": ("✗", "red")}




def plain(*parts: object | tuple[object, str]) -> Text:
    """The one way outside text reaches the terminal: each part as text (never markup), control
    characters visible; a ``(text, style)`` part is styled."""
    text = Text()
    for part in parts:
        if isinstance(part, tuple):
            text.append(visible(part[0]), style=part[1])
        else:
            text.append(visible(part))
    return text


def problem_text(p: Problem) -> Text:
    style = "bold red" if p.severity == "error" else "bold yellow"
    return plain((p.location(), "bold"), ": ", (p.severity, style), ": ",
                 *(((p.key, "cyan"), ": ") if p.key else ()), p.message)


def problems(items: Iterable[Problem]) -> Group:
    return Group(*(problem_text(p) for p in items))


def _command(plan_rank: RankPlan, appended_from: int, show_secrets: bool) -> Text:
    """One flag and its value per line; the launcher's rank flags stand out."""
    text = Text()
    argv = plan_rank.container.shown_command(show_secrets)
    i = 0
    first = True
    while i < len(argv):
        token = argv[i]
        group = [token]
        if token.startswith("--") and "=" not in token and i + 1 < len(argv) \
                and not argv[i + 1].startswith("--"):
            group.append(argv[i + 1])
        style = "bold magenta" if i >= appended_from else ""
        if not first:
            text.append("\n")
        text.append(visible(" ".join(group)), style=style)
        first = False
        i += len(group)
    return text


def rank_panel(plan: Plan, r: RankPlan, show_secrets: bool, appended_from: int) -> Panel:
    c = r.container
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("container", plain(c.name))
    grid.add_row("image", plain(c.image))
    grid.add_row("entrypoint", plain(" ".join(c.shown_entrypoint(show_secrets)) or "(image default)"))
    grid.add_row(f"command ({len(c.command)})", _command(r, appended_from, show_secrets))
    env = c.shown_env(show_secrets)
    env_table = Table.grid(padding=(0, 1))
    env_table.add_column(style="green", no_wrap=True)
    env_table.add_column(overflow="fold")
    for k, v in env.items():
        env_table.add_row(plain(k), plain(v))
    grid.add_row(f"env ({len(env)})", env_table)
    grid.add_row("mounts", plain("\n".join(
        f"{m.source} → {m.target}" + (" (ro)" if m.read_only else "") for m in c.shown_mounts(show_secrets))))
    d = c.docker
    grid.add_row("runtime", plain(f"network {d.network_mode} · ipc {d.ipc_mode} · shm "
                                  f"{c.shm_size or 'default'} · gpus {c.gpus}"))
    if c.devices or d.cap_add or d.ulimits:
        grid.add_row("host access", plain(" · ".join(filter(None, [
            "devices " + ", ".join(c.devices) if c.devices else "",
            "cap_add " + ", ".join(d.cap_add) if d.cap_add else "",
            "ulimits " + ", ".join(f"{k}={v}" for k, v in d.ulimits.items()) if d.ulimits else "",
        ]))))
    grid.add_row("labels", plain(", ".join(f"{k}={v}" for k, v in c.shown_labels(show_secrets).items())))
    from rich.syntax import Syntax  # Pygments: 10 ms, wanted only by the plan view

    run = Syntax(visible(r.docker_run(show_secrets)), "bash", word_wrap=True, theme="ansi_dark",
                 background_color="default")
    grid.add_row("docker run", run)
    role = "head" if r.rank == 0 else "worker"
    return Panel(grid, title=plain((f"rank {r.rank}", "b"), f" · {r.node} ({r.host}) · {role} · "
                                   f"port {r.port}"), title_align="left", border_style="blue")


def plan_view(plan: Plan, show_secrets: bool = False, only_rank: int | None = None,
              appended_from: int = 0) -> Group:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("recipe", plain(f"{plan.recipe_name} ({plan.recipe_path or plan.recipe_slug})"))
    head.add_row("engine", plain(f"{plan.engine} · model {plan.model} · served as "
                                 f"{plan.served_model_name}"))
    shown = kind_of(plan.cluster_kind).shown
    head.add_row("cluster", plain(f"{plan.cluster_name}" + (f" ({shown})" if shown else "")
                                  + f" · {plan.world} ranks"))
    head.add_row("plan hash", plain(plan.plan_hash))
    parts: list[RenderableType] = [Panel(head, title="plan", title_align="left")]
    for r in plan.ranks:
        if only_rank is None or r.rank == only_rank:
            parts.append(rank_panel(plan, r, show_secrets, appended_from))
    for title, text in plan.runner:  # how the cluster's kind runs it (Slurm: the job, the steps)
        parts.append(Panel(plain(text), title=plain(title), title_align="left", border_style="cyan"))
    if plan.staging:
        st = Table(title="staging", title_justify="left", expand=False)
        for col in ("node", "job", "ranks", "src", "dst", "min free"):
            st.add_column(col, overflow="fold")
        for s in plan.staging:
            st.add_row(plain(s.node), plain(f"{s.id} ({s.kind})"),
                       plain(f"{','.join(map(str, s.ranks))} of {s.world}"), plain(s.src),
                       plain(s.dst), plain(format_bytes(s.min_free_bytes)))
        parts.append(st)
    bt = Table(title=f"boot checks · ready within {format_duration(plan.boot.timeout_s)}",
               title_justify="left")
    bt.add_column("kind")
    bt.add_column("ranks")
    bt.add_column("pattern", overflow="fold")
    bt.add_row("ready", ",".join(map(str, plan.boot.ready_ranks)), plain(plan.boot.ready))
    for c in plan.boot.must_show:
        bt.add_row("must show", plain(ranks_text(c.ranks)), plain(c.pattern))
    for line in plan.boot.must_not_show:
        bt.add_row(Text("must not show", style="red"), "all", plain(line))
    parts.append(bt)
    return Group(*parts)


def catalog_line(info: RecipeInfo) -> Text:
    """One recipe of ``sparktui overview``: usable or not, and on which cluster."""
    text = Text("  ")
    if not info.name_ok:  # its sentence quotes the name, written out
        text.append("✗", style="red")
        return _hides(text.append_text(plain(" ", info.name_sentence())), info)
    if info.recipe is None or info.cluster is None:
        text.append("✗", style="red")
        first = info.problems[0] if info.problems else None
        said = f"{first.location()}: {first.message}" if first else "cannot be loaded"
        if len(info.problems) > 1:
            said = (f"{len(info.problems)} problem(s); run: sparktui validate {info.slug}; "
                    f"the first: {said}")
        text.append_text(plain(f" {info.slug}: {said}"))
        return _hides(text, info)
    if info.errors:
        text.append("✗", style="red")
    else:
        text.append("✓", style="green")
    spec = info.recipe.spec
    text.append_text(plain(f" {info.slug}: {info.recipe.title} · {spec.engine} · "
                           f"{spec.required_nodes} nodes on cluster {info.cluster.name!r}"))
    return _hides(text, info)


def _hides(text: Text, info: RecipeInfo) -> Text:
    """A recipe that hides another of its name (a ``./recipes`` copy of a shipped one) says so."""
    if info.hides:
        text.append_text(plain((f" · {info.hides_text()}", "yellow")))
    return text


def _bare_table(title: str) -> Table:
    """A table of the cluster verbs (status, doctor): columns apart by a space under a rule, no
    borders, as ``docker ps`` prints: it fits a pipe's 80 columns."""
    return Table(title=plain(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                 pad_edge=False, collapse_padding=True)


LAST_LINE_CHARS = 120  # status shows the start of each running rank's last line


def quiet_text(silent: object) -> str:
    """Seconds since a rank's last line, as the ranks table shows them (``-``: no line)."""
    if not isinstance(silent, (int, float)):
        return "-"
    return format_duration(silent)


def status_view(title: str, rows: Sequence[dict[str, object]]) -> Group:
    """``sparktui status``: a row per rank, as ``Orchestrator.status()`` lists them, then each
    rank's detail on a line of its own. Columns apart by a space, no borders (as ``docker ps``
    prints): they fit 80 (a pipe's width) unfolded; boxed, with a ninth for the detail, they
    folded "containe/r" and every id, and left the detail a few letters."""
    table = _bare_table(title)
    for col in ("rank", "node", "state", "container", "exit", "checks", "health", "restarts"):
        table.add_column(col, no_wrap=True)
    details: list[Text] = []
    for r in rows:
        checks = r["checks"]
        assert isinstance(checks, dict)
        total = sum(checks.values())
        failed = f" ✗{checks['failed']}" if checks["failed"] else ""
        state = str(r["state"])
        table.add_row(plain(r["rank"]), plain(r["node"]),
                      plain((state, STATE_STYLE.get(cast("RankState", state), ""))),
                      plain(short_id(str(r["container_id"])) if r["container_id"] else "-"),
                      plain("" if r["exit_code"] is None else r["exit_code"]),  # 0: a clean exit
                      plain(f"{checks['passed']}/{total}{failed}"), plain(r["health"] or "-"),
                      plain(r["restarts"]))
        if r["detail"]:
            details.append(plain((f"r{r['rank']} ", "bold"), r["detail"]))
        if r.get("last_line") and state in ("creating", "booting", "ready"):
            details.append(plain((f"r{r['rank']} quiet {quiet_text(r.get('silent_s'))}, last line: ",
                                  "dim"), (str(r["last_line"])[:LAST_LINE_CHARS], "dim")))
        engine = r.get("engine")
        if isinstance(engine, dict):
            details.append(plain((f"r{r['rank']} ", "bold"), engine_text(engine)))
    return Group(table, *details)


def status_lines(doc: dict[str, Any], now: float) -> list[RenderableType]:
    """``sparktui status`` as text, from its document alone (``backend.statusdoc``): the one
    worked out here, or the one a console or ``watch`` that follows the run keeps (then a last
    line says whose, and how old)."""
    from sparktui.core.canary import CanaryState

    out: list[RenderableType] = [status_view(f"{doc['title']} · run {doc['run'] or '-'}",
                                             doc["ranks"])]
    if doc.get("allocation"):
        out.append(plain(("allocation", "bold"), f": {doc['allocation']}"))
    if isinstance(doc.get("stall"), dict):
        out.append(plain(("boot stalled", "yellow"), f": {doc['stall']['sentence']}"))
    for phrase in doc.get("held_phrases") or []:
        out.append(plain(("not yours", "yellow"), f": {phrase}; --adopt takes them over"))
    if doc["run"] is not None:
        out.append(plain(f"boot checks: {checks_count(doc['checks'])}"))
        out += args_lines(doc["checks"])
        out += check_failures(doc["checks"])
    out += node_lines(doc["nodes"])
    if isinstance(doc.get("canary"), dict):
        canary = CanaryState.from_json(doc["canary"])
        said = canary.sentence(now)
        if said:
            out.append(plain((said, "bold magenta" if canary.wedged else "")))
    if doc.get("watchdog"):
        out.append(plain(doc["watchdog"]))
    if doc.get("restart_hint"):
        out.append(plain(f"the whole group back, same run: sparktui restart {doc['recipe']} --group"))
    source = doc.get("source")
    if isinstance(source, dict) and source.get("follower"):
        age = max(0.0, now - float(source["at"]))
        out.append(plain((f"as {source['follower']} (pid {source['pid']}), which follows this "
                          f"run, saw it {age:.1f} s ago", "dim")))
    return out


def engine_text(engine: dict[str, object]) -> Text:
    """A rank's engine process (``EngineView.to_json``): pid, state, CPU seconds, a warning."""
    if engine.get("pid") is None:
        return plain((str(engine.get("warning") or "no engine process"), "yellow"))
    head = f"engine pid {engine['pid']} ({engine['state']}), {float(str(engine['cpu_s'] or 0)):.0f} CPU s"
    warning = engine.get("warning")
    return plain(head, ("; " + str(warning), "yellow")) if warning else plain(head)


def ranks_text(ranks: str | list[int]) -> str:
    """A check's ``ranks`` as the recipe writes it: ``any``, ``all`` or ``0,2``."""
    return ranks if isinstance(ranks, str) else ",".join(map(str, ranks))


CheckDoc = dict[str, object]
"""A check as ``BootChecks.to_json`` gives it (the status document's ``checks``)."""


def checks_count(checks: Sequence[CheckDoc]) -> str:
    """``11/11 checks passed``, or with what failed and what is still pending."""
    states = [c["state"] for c in checks]
    text = f"{states.count('passed')}/{len(states)} checks passed"
    for state in ("failed", "pending"):
        if states.count(state):
            text += f", {states.count(state)} {state}"
    return text


def _args_summary(entry: CheckDoc) -> str | None:
    """A rank's args verdicts in a sentence (``ArgsReport.summary``); None before its dump."""
    report = entry.get("args")
    return str(report["summary"]) if isinstance(report, dict) else None


def check_failures(checks: Sequence[CheckDoc]) -> list[Text]:
    """One line per failed check: its kind, the ranks it asks for, its pattern, and where it
    failed (for a must-not-show line, the line that appeared). Patterns and log lines are
    outside text: plain ``Text``, never markup."""
    lines = []
    for check in checks:
        if check["state"] != "failed":
            continue
        ranks = cast("list[int]", check["failed_on"])
        per_rank = cast("list[CheckDoc]", check["per_rank"])
        if check["kind"] == "args":
            for entry in per_rank:
                if entry["rank"] in ranks:
                    lines.append(plain(("check failed", "bold red"), f": args on rank {entry['rank']}: ",
                                       _args_summary(entry) or "args not reported"))
            continue
        text = plain(("check failed", "bold red"),
                     f": {check['kind']} (ranks {ranks_text(cast('str | list[int]', check['ranks']))}): ",
                     (check["pattern"], "bold"))
        if check["kind"] == "must_not_show":
            text.append_text(plain(" · appeared on " + "; ".join(
                f"rank {e['rank']} line {e['line']}: {e['text']}" for e in per_rank
                if e["state"] == "failed" and e["line"] is not None)))
        else:
            text.append(f" · never appeared on rank{'s' if len(ranks) > 1 else ''} "
                        f"{', '.join(map(str, ranks))}")
        lines.append(text)
    return lines


def args_lines(checks: Sequence[CheckDoc]) -> list[Text]:
    """``rank 2 args 30/31 took effect, 1 differs: max_running_requests 16 -> 13`` per rank
    whose dump arrived or whose boot ended (the engine's version when it printed one)."""
    lines: list[tuple[int, Text]] = []
    for check in checks:
        if check["kind"] != "args":
            continue
        for entry in cast("list[CheckDoc]", check["per_rank"]):
            report, rank = entry.get("args"), cast("int", entry["rank"])
            if isinstance(report, dict):
                version = f" ({report['version']})" if report.get("version") else ""
                lines.append((rank, plain(f"rank {rank} ", str(report["summary"]), version)))
    return [text for _rank, text in sorted(lines, key=lambda item: item[0])]


def node_lines(nodes: Sequence[dict[str, object]]) -> list[Text]:
    """``sparktui status``: one line per node (as the status document gives it:
    ``backend.statusdoc``), its latest sample or why there is none."""
    lines = []
    for t in nodes:
        line = plain(f"{t['node']}: ")
        s = t.get("sample")
        if not isinstance(s, dict):
            line.append_text(plain((str(t["status"]), "red"), f" {t['detail']}"))
            lines.append(line)
            continue
        mem = ("unified " if s["unified_memory"] else "") + (
            f"memory {format_bytes(int(s['mem_available']))} free of {format_bytes(int(s['mem_total']))}")
        gpus = ", ".join(f"GPU{g['index']} {g['util_pct'] or 0:.0f}% {g['temp_c'] or 0:.0f}°C "
                         f"{g['power_w'] or 0:.0f} W" for g in cast("list[dict[str, Any]]", s["gpus"])
                         ) or str(s["gpu_note"])
        disks = ", ".join(f"{d['path']} {format_bytes(int(d['free']))} free"
                          for d in cast("list[dict[str, Any]]", s["disks"]))
        line.append_text(plain(f"{mem} · load {float(s['load1']):.2f} · {gpus} · {disks}"))
        for _code, sentence in cast("list[tuple[str, str]]", t.get("warnings") or []):
            line.append_text(plain((f" ⚠ {sentence}", "yellow")))
        lines.append(line)
    return lines


def doctor_table(title: str, findings: Sequence[Finding]) -> Table:
    """``sparktui doctor``: one row per check per node; the finding takes what the others leave
    (at 80 columns, a pipe's width, a box around four columns left it 50)."""
    table = _bare_table(title)
    for col in ("node", "check", ""):
        table.add_column(col, no_wrap=True)
    table.add_column("finding", overflow="fold")
    for f in findings:
        mark, style = VERDICT_MARK[f.verdict]
        table.add_row(plain(f.node), plain(f.check), Text(mark, style=style), plain(f.sentence))
    return table


def transfers(console: Console, *, phase_width: int, file: bool, disable: bool) -> Progress:
    """One bar per node of a copy to every node at once (staging, image sync): the node, the
    phase, bytes, speed and time left, and for staging the file it is on. Text from nodes is
    printed as text (``markup=False``)."""
    from rich.progress import (  # only the verbs that copy: 7 ms to import
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = [TextColumn(f"{{task.fields[node]:<10}} {{task.fields[phase]:<{phase_width}}}", markup=False),
               BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn(),
               TimeRemainingColumn()]
    if file:
        columns.append(TextColumn("{task.fields[file]}", markup=False))
    return Progress(*columns, console=console, disable=disable, transient=False)
