"""A small scripted OpenAI-compatible HTTP server for the remote engine's error tests: each test
sets what the next requests get (a status, a stream cut mid-reply, silence, malformed logprobs)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def chunk(token: str, token_id: int, logprob: float, top: list[tuple[str, int, float]],
          finish: str | None = None) -> dict[str, Any]:
    """One vLLM/llama.cpp-style stream chunk carrying one token and its top-N."""
    entry = {"id": token_id, "token": token, "logprob": logprob,
             "top_logprobs": [{"id": i, "token": t, "logprob": lp} for t, i, lp in top]}
    return {"choices": [{"index": 0, "delta": {"content": token}, "logprobs": {"content": [entry]},
                         "finish_reason": finish}]}


def reply(tokens: list[str]) -> list[dict[str, Any]]:
    """A stream for `tokens`: each one the favourite, with one alternative; usage last."""
    out = [chunk(t, 100 + n, -0.1, [(t, 100 + n, -0.1), ("alt", 1, -2.5)]) for n, t in enumerate(tokens)]
    out[-1]["choices"][0]["finish_reason"] = "stop"
    out.append({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": len(tokens),
                                         "prompt_tokens_details": {"cached_tokens": 9}}})
    return out


@dataclass
class Script:
    """What the server does with the next requests (tests change it between cases)."""

    models: list[str] = field(default_factory=lambda: ["scripted"])
    models_status: int = 200
    status: int = 200  # of /v1/chat/completions
    error_body: str = '{"error": {"message": "scripted failure"}}'
    chunks: list[Any] = field(default_factory=lambda: reply(["Hello", " there"]))
    cut_after: int | None = None  # close the connection after this many chunks
    delay_s: float = 0.0  # between chunks
    silent_s: float = 0.0  # before the first chunk (after the headers)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # every request body seen
    vllm: bool = False  # answer as vLLM: owned_by "vllm", /v1/completions with token-id prompts
    completion: list[int] = field(default_factory=lambda: [300, 301, 302, 303])  # ids it "generates"
    cache: list[int] = field(default_factory=list)  # what its prefix cache holds (vLLM mode)
    closed_early: threading.Event = field(default_factory=threading.Event)  # the client hung up
    keepalive_s: float | None = None  # after the chunks: an SSE comment this often, forever (no [DONE])
    # answer as mlx_lm.server: /health, and a chat reply asked without top_logprobs as one JSON
    # object of bare ids (``{"id", "logprob"}``, no text), the way 0.32 sends it at temperature > 0
    mlx: bool = False
    mlx_ids: list[int] = field(default_factory=lambda: [5, 6, 7])
    mlx_text: str = "scripted reply"


class _Handler(BaseHTTPRequestHandler):
    script: Script  # set on the subclass per server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _json(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health" and self.script.mlx:
            self._json(200, '{"status": "ok"}')
        elif self.path == "/v1/models":
            extra = {"owned_by": "vllm", "max_model_len": 512} if self.script.vllm else {}
            data = json.dumps({"object": "list", "data": [{"id": m, "object": "model", **extra}
                                                          for m in self.script.models]})
            self._json(self.script.models_status, data if self.script.models_status == 200 else self.script.error_body)
        else:
            self._json(404, '{"error": "not found"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.script.bodies.append(json.loads(self.rfile.read(length) or b"{}"))
        if self.script.status != 200:
            self._json(self.script.status, self.script.error_body)
            return
        if self.script.mlx and not self.script.bodies[-1].get("stream"):
            self._json(200, json.dumps(self._mlx_whole(self.script.bodies[-1])))
            return
        if self.path == "/v1/completions":
            self.script.chunks = self._completion(self.script.bodies[-1])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.flush()
        time.sleep(self.script.silent_s)
        try:
            for n, item in enumerate(self.script.chunks):
                if self.script.cut_after is not None and n >= self.script.cut_after:
                    self.close_connection = True
                    return
                line = item if isinstance(item, str) else json.dumps(item)
                self.wfile.write(f"data: {line}\n\n".encode())
                self.wfile.flush()
                time.sleep(self.script.delay_s)
            while self.script.keepalive_s is not None:  # alive, never done (until the client hangs up)
                self.wfile.write(b": keep-alive\n\n")
                self.wfile.flush()
                time.sleep(self.script.keepalive_s)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.script.closed_early.set()


    def _mlx_whole(self, body: dict[str, Any]) -> dict[str, Any]:
        """mlx_lm.server's non-streamed chat reply: bare ids with their logprobs, the text whole."""
        ids = self.script.mlx_ids[: body.get("max_tokens", len(self.script.mlx_ids))]
        entries = [{"id": i, "logprob": -0.5} for i in ids]
        return {"object": "chat.completion", "model": body.get("model"), "choices": [{
            "index": 0, "finish_reason": "stop", "logprobs": {"content": entries},
            "message": {"role": "assistant", "content": self.script.mlx_text}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": len(ids), "total_tokens": 9 + len(ids)}}

    def _completion(self, body: dict[str, Any]) -> list[Any]:
        """vLLM's legacy stream for a token-id prompt: `completion` continued from where the
        prompt already is in it, ``token_id:N`` tokens, the prefix-cache hit in the usage."""
        prompt = list(body["prompt"])
        cached = next((i for i, (a, b) in enumerate(zip(prompt, self.script.cache)) if a != b),
                      min(len(prompt), len(self.script.cache)))
        done = [i for i in self.script.completion if i in prompt[-len(self.script.completion):]]
        todo = [i for i in self.script.completion if i not in done][: body["max_tokens"]]
        out: list[Any] = []
        for n, token in enumerate(todo):
            top = {f"token_id:{token}": -0.25, "token_id:7": -1.5}
            last = n == len(todo) - 1
            reason = ("stop" if len(done) + len(todo) == len(self.script.completion) else "length") if last else None
            out.append({"choices": [{"index": 0, "text": f"<{token}>", "finish_reason": reason, "logprobs": {
                "tokens": [f"token_id:{token}"], "token_logprobs": [-0.25], "top_logprobs": [top]}}]})
        out.append({"choices": [], "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(todo),
                                             "prompt_tokens_details": {"cached_tokens": cached}}})
        self.script.cache = prompt + todo
        return out


class ScriptedServer:
    """The server on 127.0.0.1 and a free port, in a daemon thread."""

    def __init__(self) -> None:
        self.script = Script()
        handler = type("Handler", (_Handler,), {"script": self.script})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def reset(self) -> Script:
        """A fresh script for the next case (the handler class holds the same object)."""
        fresh = Script()
        self.script.__dict__.update(fresh.__dict__)
        return self.script

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
