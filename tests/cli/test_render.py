"""The CLI's status and doctor output (``sparktui.cli.render``): outside values print verbatim."""

from __future__ import annotations

import io
import json

from rich.console import Console, RenderableType

from sparktui.backend.doctor import Finding
from sparktui.backend.events import NodeTelemetry
from sparktui.cli import render
from sparktui.core.telemetry import DiskSample, GpuSample, NodeSample

MARKUP = "[/red] [bold]x[/bold] [link=http://e]y[/link]"


def shown(*items: RenderableType) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=300, color_system=None, highlight=False)
    for item in items:
        console.print(item)
    return buf.getvalue()


def row(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "rank": 0, "node": "spark1", "state": "ready", "container_id": "0123456789abcdef",
        "exit_code": None, "restarts": 1, "checks": {"passed": 3, "failed": 0, "pending": 1},
        "health": 200, "detail": ""}
    return {**base, **over}


def test_status_view_has_a_row_per_rank() -> None:
    text = shown(render.status_view("Demo · run demo-1", [
        row(), row(rank=1, node="spark2", state="failed", container_id=None, exit_code=1,
                   checks={"passed": 1, "failed": 2, "pending": 0}, health=None, detail="boom")]))
    assert text.splitlines()[0].rstrip() == "Demo · run demo-1"
    assert "0123456789ab " in text and "0123456789abc" not in text  # a short container id
    assert "3/4" in text and "1/3 ✗2" in text and "boom" in text
    assert "None" not in text
    [line] = [ln for ln in shown(render.status_view("t", [row(state="stopped", exit_code=0)]))
              .splitlines() if "stopped" in ln]
    assert line.split()[3:5] == ["0123456789ab", "0"]  # a clean exit


def test_status_view_fits_a_pipe_and_gives_each_detail_a_line() -> None:
    """80 columns (what Rich gives a pipe): no header or id folded, the details below."""
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None, highlight=False).print(render.status_view("t", [
        row(state="restarting", detail="exited with code 137: NCCL error, then a long tail of "
                                       "the engine's last lines that goes on and on"),
        row(rank=1, node="spark2")]))
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    assert lines[1].split() == ["rank", "node", "state", "container", "exit", "checks", "health",
                                "restarts"]
    assert lines[3].split()[:4] == ["0", "spark1", "restarting", "0123456789ab"]
    assert lines[5].startswith("r0 exited with code 137: NCCL error")
    assert not any(ln.startswith("r1 ") for ln in lines)  # no detail, no line


def test_status_view_prints_outside_values_verbatim() -> None:
    text = shown(render.status_view(f"title {MARKUP}", [row(node=f"n{MARKUP}", detail=MARKUP,
                                                             state="[/x]")]))
    assert text.splitlines()[0].rstrip() == f"title {MARKUP}"
    assert text.count(MARKUP) == 3 and "[/x]" in text


def sample(**over: object) -> NodeSample:
    base: dict[str, object] = {
        "mem_total": 128 * 2**30, "mem_available": 100 * 2**30, "unified": True, "load1": 0.5,
        "cpu_ticks": (1, 2), "gpus": [GpuSample(0, "GB10", 97.0, 71.0, 95.0, None, None)],
        "disks": [DiskSample("/data", 61 * 2**30, 900 * 2**30)]}
    return NodeSample(**{**base, **over})  # type: ignore[arg-type]


def as_document(*nodes: NodeTelemetry) -> list[dict[str, object]]:
    """The nodes as a status document holds them: JSON, read back."""
    return list(json.loads(json.dumps([t.to_json() for t in nodes])))


def test_node_lines_one_per_node() -> None:
    lines = render.node_lines(as_document(
        NodeTelemetry("spark1", "ok", sample(), warnings=[("low-memory", "head memory low")]),
        NodeTelemetry("spark2", "unreachable", detail="ssh: connection refused"),
    ))
    assert shown(*lines).splitlines() == [
        "spark1: unified memory 100.0 GiB free of 128.0 GiB · load 0.50 · GPU0 97% 71°C 95 W · "
        "/data 61.0 GiB free ⚠ head memory low",
        "spark2: unreachable ssh: connection refused",
    ]
    assert lines[0].spans[-1].style == "yellow" and lines[1].spans[0].style == "red"


def test_node_lines_print_outside_values_verbatim() -> None:
    lines = render.node_lines(as_document(
        NodeTelemetry(f"a{MARKUP}", "ok", sample(gpus=[], gpu_note=MARKUP,
                                                  disks=[DiskSample(f"/d{MARKUP}", 1, 2)]),
                      warnings=[("x", MARKUP)]),
        NodeTelemetry(f"b{MARKUP}", "stale", detail=MARKUP),
    ))
    text = shown(*lines)
    assert text.count(MARKUP) == 6, text


def test_doctor_table_marks_each_verdict_and_prints_findings_verbatim() -> None:
    table = render.doctor_table(f"doctor · {MARKUP} on sparks", [
        Finding("spark1", "ssh", "passed", "reachable"),
        Finding("spark2", "disk", "warned", MARKUP),
        Finding(f"s{MARKUP}", f"c{MARKUP}", "failed", "docker: [/red] not running"),
    ])
    text = shown(table)
    assert text.splitlines()[0].rstrip() == f"doctor · {MARKUP} on sparks"
    assert text.count(MARKUP) == 4 and "docker: [/red] not running" in text
    assert [next(ch for ch in line if ch in "✓!✗") for line in text.splitlines()[3:]] == ["✓", "!", "✗"]
    buf = io.StringIO()  # 80 columns (a pipe): node, check and mark whole, the finding folded
    Console(file=buf, width=80, color_system=None, highlight=False).print(render.doctor_table("d", [
        Finding("spark1", "hf snapshot", "warned", "/home/op/.cache/huggingface/hub/models--deepseek"
                "-ai--DeepSeek-V4.1-Flash not found: the engine will try to download it")]))
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= 80 and lines[3].split()[:3] == ["spark1", "hf", "snapshot"]
    assert "".join(ln[24:].strip() for ln in lines[3:]).startswith("/home/op/.cache/huggingface/")
