"""The console's Prometheus endpoint (``sparktui --metrics [HOST:]PORT``): what ``watch
--metrics`` serves, for the recipe open in the console (``backend.exporter``), on loopback
unless a host is named. A helper the main screen owns: it follows the open recipe's
Orchestrator, rebuilds the served snapshot every second on the event loop, and stops the
server when the console closes."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from sparktui.backend.exporter import StateCollector, serve

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from sparktui.backend.orchestrator import Orchestrator

REFRESH_S = 1.0


class ConsoleExport:
    def __init__(self, host: str, port: int) -> None:
        """Listens at once (``OSError`` when it cannot)."""
        self.collector = StateCollector(None)
        self.server: WSGIServer | None = serve(self.collector, host, port)
        self.host = host

    @property
    def where(self) -> str:
        port = self.server.server_port if self.server is not None else 0
        return f"http://{self.host}:{port}/metrics"

    def follow(self, orch: Orchestrator | None) -> None:
        """Serve this recipe's state from now on (None: the console has no recipe open)."""
        self.collector.orch = orch
        self.collector.refresh()

    def refresh(self) -> None:
        self.collector.refresh()

    async def close(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await asyncio.to_thread(server.shutdown)
            server.server_close()
