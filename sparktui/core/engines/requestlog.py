"""The lines an engine prints about the requests it serves: its HTTP server's access log
(uvicorn's, in SGLang and vLLM alike) and its own request log (SGLang's ``--log-requests``,
vLLM's ``--enable-log-requests``).

Their text is the client's (a path, a query, a prompt, a request id taken from a header), and
anyone who reaches a rank's port writes it. So they are data, never boot evidence: the checks,
the engine's fatal lines and the ready line skip them (``core/checks``). Each shape is anchored
at the line's start, after the engine's own prefix, and everything the engine writes there is
fixed text: a line the engine wrote about itself (a traceback, an NCCL error) cannot take it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Colours: uvicorn colours its level and status code, vLLM its process prefix, when the output
# is a terminal (a container started with a tty).
_SGR = re.compile(r"\x1b\[[0-9;]*m")

_METHOD = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # an HTTP token (RFC 9110): h11 takes any, lowercase too
UVICORN_ACCESS = (
    # uvicorn's AccessFormatter: '%(levelprefix)s %(client_addr)s - "%(request_line)s"
    # %(status_code)s'; the level is INFO padded to 8, the address may be empty (no peer), the
    # request line is method, target and version, the status a code and its phrase. The target
    # is anything (uvicorn refuses spaces in it, a lenient server does not), up to the last
    # ' HTTP/'. Status phrases are letters, spaces, hyphens and one apostrophe ("I'm a Teapot").
    r'INFO: +(?:\S+:\d+)? - "' + _METHOD + r' .* HTTP/\d(?:\.\d)?" \d{3}(?: [A-Za-z\' -]*)?$'
)
"""An access-log line of uvicorn, after whatever prefix the engine puts before its loggers."""


class RequestLines:
    """One engine's request lines: ``bodies`` after an optional ``prefix`` at the line's start."""

    def __init__(self, prefix: str, bodies: Sequence[str]) -> None:
        self._regex = re.compile(f"(?:{prefix})?(?:{'|'.join(bodies)})")

    def __call__(self, text: str) -> bool:
        if "\x1b" in text:
            text = _SGR.sub("", text)
        return self._regex.match(text) is not None


PROBE_HINT = '"GET /'
PROBE_REQUESTS = ('"GET /health HTTP/', '"GET /v1/models HTTP/')
"""sparktui's own health probes as an access log writes them (``backend/health``)."""
