"""Health probes over a node shell's connection opener, at their rate, and honest about ranks
that run no engine. Real sockets: small HTTP servers on this machine stand in for the engines
(the demo recipe's ports on the local cluster; run inside a private network namespace)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from sparktui.backend import health
from sparktui.backend.board import Board
from sparktui.backend.events import Event, RankChanged
from sparktui.backend.health import HealthProber
from sparktui.backend.http import ByteReader, ByteWriter, Opener, request
from sparktui.backend.nodeshell import LocalShell, NodeShell, SshShell
from sparktui.core.cluster import Cluster, load_cluster, local_cluster
from sparktui.core.plan import Plan, build_plan
from sparktui.core.ranks import Cause
from sparktui.core.recipe import load_recipe
from tests.conftest import CLUSTER4, RECIPES

DEMO = RECIPES / "demo-tp4" / "recipe.toml"


@dataclass
class StandInEngine:
    """A real HTTP server on one port: answers every request, remembers when and what."""

    model: str
    seen: list[tuple[float, str]] = field(default_factory=list)
    chunked: bool = False
    status: int = 200  # what /health answers (503: booting)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split()[1].decode()
        self.seen.append((time.monotonic(), path))
        status = b"200 OK"
        if path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": self.model}]}).encode()
        else:
            body = b'{"status": "ok"}'
            if self.status != 200:
                status, body = b"%d Service Unavailable" % self.status, b'{"status": "booting"}'
        if self.chunked:
            writer.write(b"HTTP/1.1 " + status + b"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                         + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                         % len(body) + body)
        await writer.drain()
        writer.close()

    def paths(self) -> list[str]:
        return [p for _, p in self.seen]


@pytest.fixture
async def one_server() -> AsyncIterator[tuple[StandInEngine, int]]:
    engine = StandInEngine("m")
    server = await asyncio.start_server(engine.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield engine, port
    server.close()
    await server.wait_closed()


async def test_request_through_the_local_shells_opener(
        one_server: tuple[StandInEngine, int]) -> None:
    engine, port = one_server
    shell = LocalShell(local_cluster(1).nodes[0])
    res = await request("127.0.0.1", port, "/v1/models", opener=shell.open_connection)
    assert res.status == 200 and res.json() == {"object": "list", "data": [{"id": "m"}]}
    engine.chunked = True
    res = await request("127.0.0.1", port, "/health", opener=shell.open_connection)
    assert res.status == 200 and res.json() == {"status": "ok"}
    assert engine.paths() == ["/v1/models", "/health"]


async def test_request_goes_where_the_opener_takes_it(
        one_server: tuple[StandInEngine, int]) -> None:
    """The address is the opener's to reach (on a node: through SSH); request only writes HTTP
    on the streams it gets."""
    engine, port = one_server
    asked: list[tuple[str, int]] = []

    async def via_node(host: str, target: int) -> tuple[ByteReader, ByteWriter]:
        asked.append((host, target))
        return await asyncio.open_connection("127.0.0.1", port)

    res = await request("10.9.9.9", 30000, "/health", opener=via_node)
    assert res.status == 200 and asked == [("10.9.9.9", 30000)] and engine.paths() == ["/health"]


async def test_a_refused_or_silent_port_raises_what_probes_expect() -> None:
    shell = LocalShell(local_cluster(1).nodes[0])
    with socket_bound() as port, pytest.raises(OSError):  # bound, never listening: refused
        await request("127.0.0.1", port, "/health", opener=shell.open_connection)

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    try:
        with pytest.raises(asyncio.TimeoutError):
            await request("127.0.0.1", server.sockets[0].getsockname()[1], "/health",
                          timeout=0.3, opener=shell.open_connection)
    finally:
        server.close()


class socket_bound:
    def __enter__(self) -> int:
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        port: int = self.sock.getsockname()[1]
        return port

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


# -- the prober ------------------------------------------------------------------------------


def demo_board(cluster: Cluster) -> tuple[Plan, Board, list[Event]]:
    plan = build_plan(load_recipe(DEMO), cluster)
    events: list[Event] = []
    return plan, Board(plan, [cluster.nodes[r.rank] for r in plan.ranks], events.append), events


@pytest.fixture
async def engines() -> AsyncIterator[tuple[Plan, Board, list[Event], list[StandInEngine]]]:
    """The demo recipe on the local cluster, each rank's port answered by a real server."""
    cluster = local_cluster(4)
    plan, board, events = demo_board(cluster)
    stand_ins = [StandInEngine(plan.served_model_name) for _ in plan.ranks]
    servers = [await asyncio.start_server(f.handle, "127.0.0.1", r.port)
               for f, r in zip(stand_ins, plan.ranks, strict=True)]
    yield plan, board, events, stand_ins
    for s in servers:
        s.close()
        await s.wait_closed()


def openers(plan: Plan, board: Board) -> dict[str, Opener]:
    """Each node's opener, through this machine's shell (the local runtime's ``NodeProbe``)."""
    return {info.node.name: LocalShell(info.node).open_connection for info in board.ranks}


async def test_booting_every_second_ready_every_interval_gone_never(
        engines: tuple[Plan, Board, list[Event], list[StandInEngine]]) -> None:
    plan, board, _events, stand_ins = engines
    r0, r1, r2, r3 = board.ranks
    for info in (r0, r1, r2):
        board.set_state(info, "creating")
        board.set_state(info, "booting")
    board.set_state(r1, "ready")
    board.set_state(r2, "ready")
    board.set_state(r3, "failed", Cause("exited", 1))
    prober = HealthProber(board, openers(plan, board), interval=3.0)
    started = time.monotonic()
    task = asyncio.create_task(prober.loop())
    # three rounds of the ready ranks (at 0, 3 and 6 s), however loaded the machine is
    await until(lambda: all(len(s.seen) >= 3 for s in stand_ins[1:3]), "three ready rounds",
                timeout=30.0)
    elapsed = time.monotonic() - started
    prober.closed = True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    # booting: every probe the adapter lists (the head's /v1/models too), every second: about
    # twice as many rounds as the ready ranks got in the same time, never more than one a second
    rounds = stand_ins[0].paths().count("/health")
    assert 5 <= rounds <= elapsed + 2, (elapsed, stand_ins[0].paths())
    assert stand_ins[0].paths().count("/v1/models") == rounds
    # ready: only /health, once per interval
    for stand_in in stand_ins[1:3]:
        assert stand_in.paths() == ["/health"] * 3, stand_in.paths()
        times = [t for t, _ in stand_in.seen]
        assert all(b - a >= 2.95 for a, b in itertools.pairwise(times)), times
    # failed: never asked
    assert stand_ins[3].seen == []
    assert [i.health for i in board.ranks] == [200, 200, 200, None]


async def until(what: Callable[[], bool], why: str, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, f"timed out waiting for {why}"
        await asyncio.sleep(0.02)


async def test_a_ready_line_gets_the_booting_ranks_probed_at_once(
        engines: tuple[Plan, Board, list[Event], list[StandInEngine]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An SGLang worker is ready by its /health once rank 0's ready line appeared: the line gets
    the booting ranks probed now, and again shortly after while one still answers 503, instead
    of at the next tick (an hour away here: only the line can bring these probes)."""
    monkeypatch.setattr(health, "HEALTH_BOOTING_S", 3600.0)
    plan, board, _events, stand_ins = engines
    for info in board.ranks:
        board.set_state(info, "creating")
        board.set_state(info, "booting")
    for stand_in in stand_ins[1:]:
        stand_in.status = 503
    prober = HealthProber(board, openers(plan, board))
    task = asyncio.create_task(prober.loop())
    try:
        await until(lambda: all(f.seen for f in stand_ins), "the first round")
        first = [len(f.seen) for f in stand_ins]
        # a stand-in sees its request before the prober has read the answer
        await until(lambda: [i.health for i in board.ranks] == [200, 503, 503, 503], "the first answers")
        # rank 0's ready line, as the log follower hands it over
        board.checks.feed(0, [(1, "The server is fired up and ready to roll!")])
        board.apply_checks(board.ranks[0])
        board.ready_line()
        assert board.ranks[0].state == "ready"
        await until(lambda: all(len(f.seen) > n for f, n in zip(stand_ins[1:], first[1:], strict=True)),
                    "the workers probed again")
        assert [i.state for i in board.ranks] == ["ready"] + ["booting"] * 3  # still 503
        for stand_in in stand_ins[1:]:
            stand_in.status = 200  # the workers' health servers turn ready a moment later
        await until(lambda: all(i.state == "ready" for i in board.ranks), "every rank ready")
        assert len(stand_ins[0].seen) == first[0]  # the ready head is not asked again so soon
    finally:
        prober.closed = True
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_head_ready_by_its_line_shows_its_health_now_not_its_booting_503(
        engines: tuple[Plan, Board, list[Event], list[StandInEngine]]) -> None:
    """Seen under tmux: rank 0 "ready" beside a 503 for a whole interval, the answer of its
    last probe while booting. Until it answers 200 it is asked at the booting rate."""
    plan, board, _events, stand_ins = engines
    head = board.ranks[0]
    board.set_state(head, "creating")
    board.set_state(head, "booting")
    stand_ins[0].status = 503
    prober = HealthProber(board, openers(plan, board), interval=3600.0)
    task = asyncio.create_task(prober.loop())
    try:
        await until(lambda: head.health == 503, "the booting probe")
        board.checks.feed(0, [(1, "The server is fired up and ready to roll!")])
        board.apply_checks(head)
        assert (head.state, head.health) == ("ready", 503)
        stand_ins[0].status = 200
        await until(lambda: head.health == 200, "the ready head asked again", timeout=3.0)
        asked = len(stand_ins[0].seen)
        await asyncio.sleep(1.5)
        assert len(stand_ins[0].seen) == asked  # healthy and ready: the next is an interval away
    finally:
        prober.closed = True
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_rank_that_leaves_the_running_states_shows_no_code(
        engines: tuple[Plan, Board, list[Event], list[StandInEngine]]) -> None:
    plan, board, events, stand_ins = engines
    r1 = board.ranks[1]
    board.set_state(r1, "creating")
    board.set_state(r1, "booting")
    prober = HealthProber(board, openers(plan, board))
    await prober.probe_all()
    assert r1.health == 200
    board.set_state(r1, "failed", Cause("exited", 137))
    assert r1.health is None
    last = [e.rank for e in events if isinstance(e, RankChanged) and e.rank.rank == 1][-1]
    assert last.state == "failed" and last.health is None  # the event that says failed says "-"
    board.set_health(r1, 200)  # an answer from a probe sent before it failed
    assert r1.health is None
    count = len(stand_ins[1].seen)
    await prober.probe_all()
    assert len(stand_ins[1].seen) == count  # not probed

    # an old code left on a rank that is not probed is cleared at the next round
    r1.health = 200
    assert r1 not in prober.due(time.monotonic())
    assert r1.health is None


async def test_ranks_that_serve_no_http_are_not_probed(
        engines: tuple[Plan, Board, list[Event], list[StandInEngine]]) -> None:
    plan, board, _events, stand_ins = engines
    # rank 2 as a headless vLLM worker's plan has it: no port open
    plan = replace(plan, ranks=[replace(r, serves_http=r.rank != 2) for r in plan.ranks])
    board = Board(plan, [i.node for i in board.ranks], lambda _e: None)
    for info in board.ranks:
        board.set_state(info, "creating")
        board.set_state(info, "booting")
    prober = HealthProber(board, openers(plan, board))
    await prober.probe_all()
    assert [i.health for i in board.ranks] == [200, 200, None, 200]
    assert stand_ins[2].seen == [] and all(f.seen for i, f in enumerate(stand_ins) if i != 2)


async def test_a_node_without_its_ssh_connection_gives_no_code_and_no_error(tmp_path: Path) -> None:
    """A lost SSH link: the probe fails like a refused port (health None), the loop goes on."""
    cluster = load_cluster(CLUSTER4)
    plan, board, _events = demo_board(cluster)
    info = board.ranks[1]
    board.set_state(info, "creating")
    board.set_state(info, "booting")
    ssh: dict[str, NodeShell] = {n.name: SshShell(n) for n in cluster.nodes}
    with pytest.raises(ConnectionError, match="no SSH connection"):
        await ssh[info.node.name].open_connection("127.0.0.1", plan.ranks[1].port)
    prober = HealthProber(board, {name: shell.open_connection for name, shell in ssh.items()})
    assert await prober.probe(info) is None
    task = asyncio.create_task(prober.loop())
    await asyncio.sleep(1.5)
    assert not task.done()  # still probing, every second while the rank boots
    prober.closed = True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- the rate's settings -----------------------------------------------------------------------


def test_health_interval_from_the_cluster_file_then_config_then_10s(tmp_path: Path) -> None:
    from sparktui.backend.orchestrator import Orchestrator
    from sparktui.core.cluster import load_cluster_text
    from sparktui.core.errors import ClusterError
    from sparktui.ui.settings import load_settings

    nodes = '[[nodes]]\nname = "a"\nhost = "a.lan"\nhf_cache = "/hf"\n'
    path = tmp_path / "cluster.toml"
    assert load_cluster_text(f'name = "c"\n[health]\ninterval = "30s"\n{nodes}').health_interval == 30
    assert load_cluster_text(f'name = "c"\n{nodes}').probe_interval == 10
    for bad, said in (('"250ms"', "must be at least 1s"), ('"soon"', "bad duration 'soon'"),
                      ("true", "expected a string")):
        with pytest.raises(ClusterError) as err:
            load_cluster_text(f'name = "c"\n\n[health]\ninterval = {bad}\n{nodes}', path)
        assert f"{path}:4:1: error: health.interval: {said}" in str(err.value)

    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text('[health]\ninterval = "20s"\n')
    assert load_settings(config).health_interval == 20
    (config / "config.toml").write_text('[health]\ninterval = "0.5s"\n')
    settings = load_settings(config)
    assert settings.health_interval is None
    assert str(settings.problems[0]).startswith(
        f"{config / 'config.toml'}:2:1: error: health.interval: must be at least 1s")

    recipe = load_recipe(DEMO)

    def interval(cluster: Cluster, preferred: float | None) -> float:
        orch = Orchestrator(recipe, cluster, build_plan(recipe, cluster), state_root=tmp_path / "s",
                            health_interval=preferred)
        return orch.health.interval

    local = local_cluster(4)
    assert interval(local, None) == 10 and interval(local, 20) == 20
    assert interval(replace(local, health_interval=30), 20) == 30  # the cluster file wins
