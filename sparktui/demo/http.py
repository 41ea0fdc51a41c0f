"""HTTP on ``--host``/``--port``: ``/health`` on every rank that serves (503 while booting, 200
when ready), and on rank 0 ``/v1/models``, ``/get_model_info``, ``/v1/chat/completions``,
``/v1/completions``, ``/metrics`` (SGLang's with ``--enable-metrics`` only) and, as SGLang,
``/generate``.
Its lines are the engines' uvicorn lines (the access line after the engine's server prefix)."""

from __future__ import annotations

import json
import socket
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from .chat import BadRequest, Chat, ChatRequest, parse_completion, parse_request
from .config import Config
from .lines import ENGINE_NAME
from .log import Log
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE


class Rank(Protocol):
    """What the server reads of its rank (``rank.Rank``, which imports this module: a protocol
    here, not an import back)."""

    cfg: Config
    log: Log
    chat: Chat
    ready: threading.Event

    def metrics(self) -> str | None: ...

SERVER_VERSION = "sparktui-demo-engine/0.1"
POST_ROUTES = {"/v1/chat/completions": "chat", "/v1/completions": "completion", "/generate": "generate"}
"""What rank 0 answers a POST on (``/generate``: the SGLang personality only)."""


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, rank: Rank) -> None:
        self.rank = rank
        if ":" in rank.cfg.host:
            self.address_family = socket.AF_INET6
        super().__init__((rank.cfg.host, rank.cfg.port), Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn, a DNS lookup that can hang in a container.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        kind, value = sys.exc_info()[:2]
        name = kind.__name__ if kind else "?"
        self.rank.log(f"DEMO http: error while serving {client_address}: {name}: {value}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = SERVER_VERSION
    sys_version = ""
    timeout = 120

    @property
    def rank(self) -> Rank:
        server = self.server
        assert isinstance(server, Server)
        return server.rank

    # -- logging like uvicorn's access log ------------------------------------------------------
    # The request line is logged as it came, as a lenient server would (uvicorn refuses a target
    # with spaces): any text a client sends can reach an access line, which is what sparktui's
    # rule for them (core/engines/requestlog) is tested against.
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        try:
            status = int(code)
            phrase = self.responses.get(status, ("",))[0]
        except (TypeError, ValueError):
            status, phrase = 0, str(code)
        host, port = self.client_address[:2]
        self.rank.log.server(f'INFO:     {host}:{port} - "{self.requestline}" {status} {phrase}')

    def log_error(self, format: str, *args: Any) -> None:
        if format.startswith("code "):  # send_error: the request could not be parsed
            # uvicorn's sentence, which names no part of the request (the stdlib's quotes it).
            self.rank.log.server("WARNING:  Invalid HTTP request received.")
        else:
            self.log_message(format, *args)

    def log_message(self, format: str, *args: Any) -> None:
        self.rank.log("DEMO http: " + (format % args))

    # -- helpers --------------------------------------------------------------------------------
    def send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_text(self, status: int, text: str, content_type: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str) -> None:
        body = {"object": "error", "message": message, "type": kind, "param": None, "code": status}
        self.send_json(status, body)

    def _api_available(self) -> bool:
        eng = self.rank
        if eng.cfg.node_rank != 0:
            message = f"{ENGINE_NAME} rank {eng.cfg.node_rank} is a worker: send API requests to rank 0"
            self._error(404, message, "NotFoundError")
            return False
        if not eng.ready.is_set():
            self._error(503, f"{ENGINE_NAME} is still booting", "ServiceUnavailableError")
            return False
        return True

    # -- routes ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        eng = self.rank
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/health_generate"):
            if eng.ready.is_set():
                self.send_json(200, {"status": "ok"})
            else:
                self.send_json(503, {"status": "starting",
                                      "detail": f"{ENGINE_NAME} rank {eng.cfg.node_rank} is not ready"})
        elif path == "/v1/models":
            if self._api_available():
                self.send_json(200, {"object": "list", "data": [eng.chat.model_card()]})
        elif path == "/get_model_info":
            if self._api_available():
                self.send_json(200, eng.chat.model_info())
        elif path == "/metrics" and (body := eng.metrics()) is not None:
            self.send_text(200, body, METRICS_CONTENT_TYPE)
        else:
            self._error(404, f"{ENGINE_NAME}: no route for GET {path}", "NotFoundError")

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length_text = self.headers.get("Content-Length")
        try:
            length = int(length_text) if length_text is not None else 0
            if length < 0:
                raise ValueError(length_text)
        except ValueError:
            self.close_connection = True
            self._error(400, "bad Content-Length", "BadRequestError")
            return
        raw = self.rfile.read(length) if length else b""
        kind = POST_ROUTES.get(path)
        if kind is None or (kind == "generate" and self.rank.cfg.engine != "sglang"):
            self._error(404, f"{ENGINE_NAME}: no route for POST {path}", "NotFoundError")
            return
        if not self._api_available():
            return
        try:
            request: ChatRequest = (parse_request(raw) if kind == "chat"
                                    else parse_completion(raw, native=kind == "generate"))
        except BadRequest as exc:
            self._error(400, str(exc), "BadRequestError")
            return
        self.rank.chat.serve(self, request, kind)
