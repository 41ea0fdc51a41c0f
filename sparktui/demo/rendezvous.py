"""The rendezvous over real TCP, and the group it forms for the rank's lifetime.

Rank 0 listens at the rendezvous address (on the loopback when the group meets there, else on
every interface); each worker connects (retrying every 0.2 s until the rendezvous timeout) and
says ``hello <rank> <nnodes>``; rank 0 answers ``go <peers>`` once all are in, or
``error <reason>``. The connections stay open: a worker says ``ready`` when booted, either side
``bye`` when it stops on a signal (the peer then waits 1 s for its own signal before falling
apart, so that stopping every rank at once exits 0 everywhere), and a rank that dies or leaves
makes the others exit with code 4, as a TP group falling apart does.

Every completion is a step of the whole group, as a TP forward pass is: rank 0 sends
``step <n>`` to every worker and waits until each answered ``done <n>``. A worker that does not
answer (stopped by SIGSTOP, wedged) makes rank 0's completions hang while its ``/health`` still
answers 200, as SGLang's does.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from .config import Config
from .life import Life
from .lines import EXIT_GROUP_LOST, EXIT_USAGE, fatal, group_lost
from .log import Log

CONNECT_RETRY = 0.2
HELLO_TIMEOUT = 10.0
BYE_GRACE = 1.0
STEP_POLL = 0.5  # a step waiting for a worker looks this often whether the rank is exiting


class _Conn:
    """One rendezvous TCP connection speaking newline-terminated text."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = b""
        self._send_lock = threading.Lock()
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def send_line(self, text: str, *, nowait: bool = False) -> None:
        data = (text + "\n").encode()
        with self._send_lock:
            if nowait:
                self.sock.send(data, getattr(socket, "MSG_DONTWAIT", 0))
            else:
                self.sock.sendall(data)

    def read_line(self) -> str | None:
        """The next line, or None at end of stream. Socket errors and timeouts raise OSError."""
        while b"\n" not in self._buf:
            data = self.sock.recv(4096)
            if not data:
                return None
            self._buf += data
            if len(self._buf) > 65536:
                raise OSError("rendezvous line too long")
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("utf-8", "replace").strip()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _Peer:
    def __init__(self, rank: int, conn: _Conn, addr: str) -> None:
        self.rank = rank
        self.conn = conn
        self.addr = addr
        self.ready = False
        self.bye = False
        self.done = 0  # head: the last step this worker answered


def _listen_address(dist_host: str, family: int) -> str:
    """Where rank 0 listens for the rendezvous: on the loopback when the group meets there (the
    local cluster: nothing else on the network should reach it), else on every interface."""
    if dist_host in ("127.0.0.1", "localhost", "::1"):
        return "::1" if family == socket.AF_INET6 else "127.0.0.1"
    return "::" if family == socket.AF_INET6 else "0.0.0.0"


class Group:
    """This rank's side of the rendezvous: the head's workers, or a worker's head."""

    def __init__(self, cfg: Config, log: Log, life: Life) -> None:
        self.cfg = cfg
        self.rank = cfg.node_rank
        self.log = log
        self.life = life
        self._cond = threading.Condition()
        self._workers: dict[int, _Peer] = {}  # head: rank -> peer
        self._formed = False
        self._head: _Peer | None = None  # worker: the connection to rank 0
        self._steps = 0  # head: steps sent to the workers
        self._step_lock = threading.Lock()  # head: steps reach every worker in their order

    def form(self) -> str | None:
        """Form the group; the peers text, or None when this rank is exiting."""
        cfg = self.cfg
        if cfg.nnodes == 1:
            return f"0@{cfg.dist_host or 'local'}"
        if self.rank == 0:
            return self._head_form()
        return self._worker_form()

    def _head_form(self) -> str | None:
        cfg, log = self.cfg, self.log
        assert cfg.dist_port is not None and cfg.dist_host is not None
        family = socket.AF_INET6 if ":" in cfg.dist_host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((_listen_address(cfg.dist_host, family), cfg.dist_port))
            listener.listen(64)
        except OSError as exc:
            listener.close()
            self.life.fatal([
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                f"network address. port: {cfg.dist_port}, code: -{exc.errno}, message: {exc.strerror}",
                fatal(f"rendezvous port {cfg.dist_port} unavailable", EXIT_USAGE),
            ], EXIT_USAGE)
            return None
        listener.settimeout(CONNECT_RETRY)
        log(f"DEMO rendezvous: rank 0 listening on port {cfg.dist_port} for {cfg.nnodes - 1} worker(s)")
        deadline = time.monotonic() + cfg.rendezvous_timeout
        try:
            while True:
                with self._cond:
                    if len(self._workers) == cfg.nnodes - 1:
                        self._formed = True
                        workers = sorted(self._workers.values(), key=lambda p: p.rank)
                        break
                if self.life.exiting:
                    return None
                if time.monotonic() >= deadline:
                    with self._cond:
                        missing = [r for r in range(1, cfg.nnodes) if r not in self._workers]
                    joined = cfg.nnodes - 1 - len(missing)
                    self.life.fatal([
                        f"torch.distributed.DistStoreError: Timed out after {cfg.rendezvous_timeout:g} "
                        f"seconds waiting for clients. {joined}/{cfg.nnodes - 1} clients joined.",
                        fatal(f"rendezvous timed out; missing rank(s) {','.join(map(str, missing))}",
                              EXIT_USAGE),
                    ], EXIT_USAGE)
                    return None
                try:
                    sock, addr = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    time.sleep(CONNECT_RETRY)
                    continue
                self.life.thread(self._serve_worker, "peer", sock, str(addr[0]))
        finally:
            listener.close()
        peers = ",".join([f"0@{cfg.dist_host}"] + [f"{p.rank}@{p.addr}" for p in workers])
        for peer in workers:
            with contextlib.suppress(OSError):  # its reader thread reports a lost peer
                peer.conn.send_line(f"go {peers}")
        return peers

    def _serve_worker(self, sock: socket.socket, addr: str) -> None:
        """Head side of one worker connection: handshake, then watch it for the group's lifetime."""
        cfg, log = self.cfg, self.log
        conn = _Conn(sock)
        sock.settimeout(HELLO_TIMEOUT)
        try:
            hello = conn.read_line()
        except OSError:
            hello = None
        parts = (hello or "").split()
        if len(parts) != 3 or parts[0] != "hello" or not parts[1].isdigit() or not parts[2].isdigit():
            log(f"DEMO rendezvous: dropped a connection from {addr} that did not say hello")
            conn.close()
            return
        rank, world = int(parts[1]), int(parts[2])
        error = None
        peer = _Peer(rank, conn, addr)
        with self._cond:
            if world != cfg.nnodes:
                error = f"world size mismatch: rank 0 has --nnodes {cfg.nnodes}, rank {rank} has {world}"
            elif not 0 < rank < cfg.nnodes:
                error = f"rank {rank} is not a worker rank of a {cfg.nnodes}-rank group"
            elif self._formed:
                error = "the group has already formed"
            elif rank in self._workers:
                error = f"rank {rank} is already connected from {self._workers[rank].addr}"
            else:
                self._workers[rank] = peer
                joined = len(self._workers)
                self._cond.notify_all()
        if error is not None:
            log(f"DEMO rendezvous: refused {addr}: {error}")
            with contextlib.suppress(OSError):
                conn.send_line(f"error {error}")
            conn.close()
            return
        log(f"DEMO rendezvous: rank {rank} joined from {addr} ({joined}/{cfg.nnodes - 1} workers)")
        sock.settimeout(None)
        while True:
            try:
                line = conn.read_line()
            except OSError:
                line = None
            if line is None:
                break
            if line == "ready":
                with self._cond:
                    peer.ready = True
                    self._cond.notify_all()
                log(f"DEMO rank {rank} reports ready")
            elif line == "bye":
                peer.bye = True
            elif line.startswith("done ") and line[5:].isdigit():
                with self._cond:
                    peer.done = max(peer.done, int(line[5:]))
                    self._cond.notify_all()
        with self._cond:
            formed = self._formed
            if not formed and self._workers.get(rank) is peer:
                del self._workers[rank]
        conn.close()
        if not formed:
            log(f"DEMO rendezvous: rank {rank} left before the group formed; waiting for it again")
            return
        self._peer_lost(rank, peer.bye)

    def _worker_form(self) -> str | None:
        cfg, log = self.cfg, self.log
        host, port = cfg.dist_host, cfg.dist_port
        assert host is not None and port is not None
        log(f"DEMO rendezvous: rank {self.rank} connecting to {host}:{port}")
        deadline = time.monotonic() + cfg.rendezvous_timeout
        last_error = "no attempt"
        reported = 0.0
        while not self.life.exiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.life.fatal([
                    f"torch.distributed.DistNetworkError: The client socket has timed out after "
                    f"{cfg.rendezvous_timeout:g}s while trying to connect to ({host}, {port}). "
                    f"Last error: {last_error}",
                    fatal(f"rendezvous with rank 0 at {host}:{port} failed", EXIT_USAGE),
                ], EXIT_USAGE)
                return None
            try:
                sock = socket.create_connection((host, port), timeout=min(2.0, max(0.05, remaining)))
            except OSError as exc:
                last_error = exc.strerror or str(exc)
                now = time.monotonic()
                if now - reported >= 10.0:
                    reported = now
                    log(f"DEMO rendezvous: rank 0 at {host}:{port} not reachable yet ({last_error}); "
                        f"retrying every {CONNECT_RETRY:g} s")
                time.sleep(CONNECT_RETRY)
                continue
            sock.settimeout(None)
            conn = _Conn(sock)
            peer = _Peer(0, conn, host)
            self._head = peer
            try:
                conn.send_line(f"hello {self.rank} {cfg.nnodes}")
                answer = conn.read_line()
            except OSError:
                answer = None
            if answer is not None and answer.startswith("go "):
                self.life.thread(self._watch_head, "head", peer)
                return answer[3:]
            self._head = None
            conn.close()
            if answer is not None and answer.startswith("error "):
                refused = f"rank 0 refused rank {self.rank}: {answer[6:]}"
                self.life.fatal([fatal(refused, EXIT_USAGE)], EXIT_USAGE)
                return None
            if answer is not None and answer != "bye":
                self.life.fatal([fatal(f"rank 0 said {answer!r} during rendezvous", EXIT_USAGE)], EXIT_USAGE)
                return None
            last_error = "rank 0 closed the connection before the group formed"
            log(f"DEMO rendezvous: lost rank 0 at {host}:{port} before the group formed; retrying")
            time.sleep(CONNECT_RETRY)
        return None

    def _watch_head(self, peer: _Peer) -> None:
        while True:
            try:
                line = peer.conn.read_line()
            except OSError:
                line = None
            if line is None:
                break
            if line == "bye":
                peer.bye = True
            elif line.startswith("step ") and line[5:].isdigit():
                with contextlib.suppress(OSError):  # a lost head is seen by the next read
                    peer.conn.send_line(f"done {line[5:]}")
        peer.conn.close()
        self._peer_lost(0, peer.bye)

    def _peer_lost(self, rank: int, said_bye: bool) -> None:
        """A rank of the formed group is gone: the group falls apart (exit 4)."""
        if self.life.exiting:
            return
        if said_bye:
            time.sleep(BYE_GRACE)  # everyone may be stopping: give our own SIGTERM a chance
            if self.life.exiting:
                return
        lines = group_lost(self.rank, rank, said_bye, self.cfg.dist_host, self.cfg.dist_port)
        self.life.fatal(lines, EXIT_GROUP_LOST)

    def wait_for_workers(self) -> None:
        """Rank 0 becomes ready only once every worker reported ready."""
        cfg, log = self.cfg, self.log
        if cfg.nnodes > 1:
            log(f"DEMO waiting for {cfg.nnodes - 1} worker(s) to report ready")
            with self._cond:
                while not all(peer.ready for peer in self._workers.values()):
                    self._cond.wait()
            log(f"DEMO all {cfg.nnodes} ranks ready")

    def step(self) -> bool:
        """Rank 0: one step of the whole group (``step <n>``, each worker's ``done <n>``); it
        waits as long as a worker does not answer. False when this rank is exiting meanwhile."""
        if self.rank != 0 or self.cfg.nnodes == 1:
            return True
        with self._step_lock:
            self._steps += 1
            n = self._steps
            workers = list(self._workers.values())
            for peer in workers:
                with contextlib.suppress(OSError):  # its reader thread reports a lost peer
                    peer.conn.send_line(f"step {n}")
        with self._cond:
            while not all(peer.done >= n for peer in workers):
                if self.life.exiting:
                    return False
                self._cond.wait(STEP_POLL)
        return True

    def report_ready(self) -> None:
        """A worker tells rank 0 it booted."""
        if self._head is not None:
            with contextlib.suppress(OSError):  # the head watcher reports a lost connection
                self._head.conn.send_line("ready")

    def say_bye(self) -> None:
        """Tell every peer this rank stops on a signal (so theirs may come too)."""
        peers = list(self._workers.values()) if self.rank == 0 else [self._head] if self._head else []
        for peer in peers:
            with contextlib.suppress(OSError):
                peer.conn.send_line("bye", nowait=True)
