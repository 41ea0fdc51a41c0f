"""The OpenAI-style API's answers: the model card, SGLang's model info, chat completions
(streamed or not) and plain completions (``/v1/completions``; SGLang's native ``/generate``) of
a canned text at about fifty tokens a second. A request waits its turn in the queue while
``--max-running-requests`` others run (``load.Load``, which ``/metrics`` reads); each completion
is then first a step of the whole group (``rendezvous.Group.step``): a worker that does not
answer makes it hang."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Protocol

from .config import Config
from .lines import CONTEXT_LEN, ENGINE_NAME, KV_TOKENS
from .load import Load, Ticket
from .log import Log


class Handler(Protocol):
    """What an answer needs of the request's handler (``http.Handler``, which imports this
    module: a protocol here, not an import back)."""

    close_connection: bool
    wfile: Any

    def send_json(self, status: int, body: Any) -> None: ...
    def send_response(self, code: int, message: str | None = None) -> None: ...
    def send_header(self, keyword: str, value: str) -> None: ...
    def end_headers(self) -> None: ...

OWNED_BY = "sparktui-demo"
DEFAULT_MAX_TOKENS = 64
TOKENS_PER_SECOND = 50.0
DEMO_TEXT = (
    "This is the sparktui demo engine. It is not a real model: every reply is the same canned text, "
    "streamed at about fifty tokens per second, so that a launcher, its health checks and its log "
    "views can be tested end to end without a GPU."
)


def demo_tokens() -> list[str]:
    words = DEMO_TEXT.split(" ")
    return [words[0]] + [" " + word for word in words[1:]]


class BadRequest(Exception):
    pass


class ChatRequest(NamedTuple):
    stream: bool
    max_tokens: int
    prompt_tokens: int


def _object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw or b"null")
    except ValueError as exc:
        raise BadRequest(f"request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def _max_tokens(value: Any, name: str = "max_tokens") -> int:
    value = DEFAULT_MAX_TOKENS if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{name}' must be a positive integer")
    return value


def parse_completion(raw: bytes, native: bool) -> ChatRequest:
    """A plain completion's body (``/v1/completions``: ``prompt``, ``max_tokens``; ``native``,
    SGLang's ``/generate``: ``text``, ``sampling_params.max_new_tokens``), never streamed."""
    body = _object(raw)
    if native:
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise BadRequest("'sampling_params' must be an object")
        prompt, tokens = body.get("text"), _max_tokens(params.get("max_new_tokens"), "max_new_tokens")
    else:
        prompt, tokens = body.get("prompt"), _max_tokens(body.get("max_tokens"))
    if not isinstance(prompt, str):
        raise BadRequest(f"'{'text' if native else 'prompt'}' must be a string")
    return ChatRequest(stream=False, max_tokens=tokens, prompt_tokens=1 + len(prompt.split()))


def parse_request(raw: bytes) -> ChatRequest:
    """A chat completion request's body, or ``BadRequest`` with the reason."""
    body = _object(raw)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        max_tokens = body.get("max_completion_tokens")
    max_tokens = _max_tokens(max_tokens)
    prompt = 0
    for message in messages:
        content = message.get("content", "") if isinstance(message, dict) else message
        prompt += 4 + len(str(content).split())
    stream = bool(body.get("stream", False))
    return ChatRequest(stream=stream, max_tokens=max_tokens, prompt_tokens=prompt)


class Chat:
    """What rank 0's API answers; counts the requests it serves (their ids) and tells ``load``
    of each (queued, running, its tokens)."""

    def __init__(self, cfg: Config, log: Log, step: Callable[[], bool] = lambda: True,
                 load: Load | None = None) -> None:
        """``step``: one step of the whole group before each completion (False: the rank exits)."""
        self.cfg = cfg
        self.log = log
        self.step = step
        self.load = load if load is not None else Load(cfg.max_running, {})
        self.created = int(time.time())
        self._req_lock = threading.Lock()
        self._req_count = 0

    def model_card(self) -> dict[str, Any]:
        return {
            "id": self.cfg.served_model_name,
            "object": "model",
            "created": self.created,
            "owned_by": OWNED_BY,
            "root": self.cfg.model_path,
            "max_model_len": CONTEXT_LEN,
        }

    def model_info(self) -> dict[str, Any]:
        return {
            "model_path": self.cfg.model_path,
            "tokenizer_path": self.cfg.model_path,
            "served_model_name": self.cfg.served_model_name,
            "is_generation": True,
            "weight_version": "default",
            "engine": ENGINE_NAME,
            "tp_size": self.cfg.nnodes,
        }

    def serve(self, handler: Handler, request: ChatRequest, kind: str = "chat") -> None:
        """Answer ``request``: ``kind`` "chat" (``/v1/chat/completions``), "completion"
        (``/v1/completions``) or "generate" (SGLang's ``/generate``)."""
        with self._req_lock:
            self._req_count += 1
            number = self._req_count
        rid = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-demo-{self.created:x}-{number}"
        ticket = self.load.arrive(request.prompt_tokens)
        try:
            self._answer(handler, request, kind, rid, ticket)
        finally:
            self.load.finish(ticket)

    def _answer(self, handler: Handler, request: ChatRequest, kind: str, rid: str, ticket: Ticket) -> None:
        batch = self.load.admit(ticket)
        self.log(f"Prefill batch. #new-seq: 1, #new-token: {request.prompt_tokens - ticket.cached}, "
                 f"#cached-token: {ticket.cached}, token usage: {batch.used_tokens / KV_TOKENS:.2f}, "
                 f"#running-req: {batch.running - 1}, #queue-req: {batch.queued}")
        all_tokens = demo_tokens()
        tokens = all_tokens[: request.max_tokens]
        finish = "length" if len(all_tokens) > request.max_tokens else "stop"
        usage = {
            "prompt_tokens": request.prompt_tokens,
            "completion_tokens": len(tokens),
            "total_tokens": request.prompt_tokens + len(tokens),
        }
        base = {"id": rid, "created": int(time.time()), "model": self.cfg.served_model_name}
        try:
            if not self.step():
                handler.close_connection = True
                return
            if request.stream:
                self._stream(handler, base, self._paced(ticket, tokens), finish, usage)
            elif kind != "chat":
                text = "".join(self._paced(ticket, tokens))
                handler.send_json(200, self._completion(kind, base, text, finish, usage))
            else:
                text = "".join(self._paced(ticket, tokens))
                handler.send_json(200, {
                    **base,
                    "object": "chat.completion",
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "logprobs": None,
                        "finish_reason": finish,
                    }],
                    "usage": usage,
                })
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            handler.close_connection = True
            self.log(f"Abort request {rid}: the client went away")
        else:
            batch = self.load.batch()
            self.log(f"Decode batch. #running-req: {batch.running}, #token: {batch.used_tokens}, "
                     f"token usage: {batch.used_tokens / KV_TOKENS:.2f}, gen throughput (token/s): "
                     f"{batch.throughput:.2f}, #queue-req: {batch.queued}")

    def _paced(self, ticket: Ticket, tokens: list[str]) -> Iterator[str]:
        """The tokens at ``TOKENS_PER_SECOND``, each told to the load as it comes (streamed or
        not, an engine generates them one a step)."""
        start = time.monotonic()
        for i, token in enumerate(tokens):
            delay = start + (i + 1) / TOKENS_PER_SECOND - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.load.token(ticket)
            yield token

    @staticmethod
    def _completion(kind: str, base: dict[str, Any], text: str, finish: str,
                    usage: dict[str, int]) -> dict[str, Any]:
        if kind == "generate":  # SGLang's native answer
            return {"text": text, "meta_info": {
                "id": base["id"], "finish_reason": {"type": finish},
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"]}}
        return {**base, "object": "text_completion", "choices": [{
            "index": 0, "text": text, "logprobs": None, "finish_reason": finish}], "usage": usage}

    @staticmethod
    def _stream(handler: Handler, base: dict[str, Any], tokens: Iterator[str], finish: str,
                usage: dict[str, int]) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def send(payload: bytes) -> None:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

        def chunk(delta: dict[str, str], reason: str | None, extra: dict[str, Any] | None = None) -> None:
            body = {**base, "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]}
            if extra:
                body.update(extra)
            send(b"data: " + json.dumps(body).encode() + b"\n\n")

        chunk({"role": "assistant", "content": ""}, None)
        for token in tokens:
            chunk({"content": token}, None)
        chunk({}, finish, {"usage": usage})
        send(b"data: [DONE]\n\n")
        handler.wfile.write(b"0\r\n\r\n")
