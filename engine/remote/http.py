"""The HTTP side of a remote engine: one `httpx2.AsyncClient`, timeouts on everything, and every
failure turned into one `EngineError` line.

Why httpx2 (the client huggingface_hub already installs): it is a maintained async client with
streaming responses and per-phase timeouts, and it adds no dependency the project does not
already carry; the `openai` package would add one, and it hides the raw ``logprobs`` objects that
each server fills differently (ids, bytes, legacy completion fields) behind its own models.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2

from engine.core.api import EngineError, ModelLoadError
from engine.core.text import printable, shortened
from engine.remote.sse import data_objects, lines_of

CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class HttpOptions:
    """Where the server is and how long to wait for it."""

    base_url: str  # e.g. "http://127.0.0.1:8080" (a trailing "/v1" is accepted and dropped)
    api_key: str = ""  # sent as a Bearer token when set; read from the environment, never stored
    timeout_s: float = 60.0  # the longest silence tolerated while reading (a long prompt, a slow token)
    turn_timeout_s: float = 600.0  # the longest a whole turn may take (keep-alive comments included)


def normalise_url(url: str) -> str:
    """``host:port``, ``http://host:port/``, ``.../v1``: one canonical base URL, or one error line.

    The one place a server URL is taken (`engine.remote.remote_engine`, the client): it is parsed
    here as httpx will parse it, so a URL httpx cannot use (port 99999, ``http://[::1``, an ESC,
    a 10 KB host) is refused now in one line naming it, not later as a 40-line traceback from the
    first request (or, in the TUI, an error that said only "ExceptionGroup").
    """
    text = url.strip().rstrip("/")
    if not text:
        raise EngineError("--server needs a URL, e.g. http://127.0.0.1:8080")
    if "://" not in text:
        text = "http://" + text
    if not text.startswith(("http://", "https://")):
        raise EngineError(f"--server must be an http:// or https:// URL, not {_shown(url)}")
    text = text.removesuffix("/v1")
    problem = _url_problem(text)
    if problem:
        raise EngineError(f"--server {_shown(url)} is not a URL logitscope can use: {problem}.")
    return text


MAX_URL = 2048  # characters: a server's base URL is dozens; a longer one is a paste gone wrong


def _url_problem(text: str) -> str:
    """Why httpx could not send a request to `text` ("" when it can)."""
    if len(text) > MAX_URL:
        return f"it is {len(text):,} characters long (at most {MAX_URL:,})"
    if any(ord(ch) < 0x21 or 0x7F <= ord(ch) < 0xA0 for ch in text):
        return "it holds a space or a control character"
    try:
        parsed = httpx2.URL(text)
        host = parsed.host
        port = parsed.port
        parsed.raw_host.decode("ascii")  # the IDNA form a request would send
        httpx2.Request("GET", parsed.join("/v1/models"))
    except Exception as exc:  # noqa: BLE001 - httpx raises InvalidURL, ValueError, UnicodeError...
        return one_line_reason(exc)
    if not host:
        return "it names no host"
    labels = parsed.raw_host.decode("ascii").strip("[]").split(".")
    if len(host) > 253 or any(len(label) > 63 for label in labels):  # what DNS (and IDNA) can carry
        return "its host name is longer than DNS allows"
    if port is not None and not 0 < port < 65536:
        return f"port {port} is not 1..65535"
    return ""


def one_line_reason(exc: Exception) -> str:
    """An exception's message on one short line, made visible (it may quote the URL)."""
    return shortened(printable(" ".join(str(exc).split()) or type(exc).__name__), 120)


def _shown(url: str) -> str:
    """The URL as the user gave it, quoted, made visible and cut to a readable length."""
    return repr(shortened(printable(url), 80))


class HttpClient:
    """JSON requests and SSE streams against one server; errors are `EngineError`s."""

    def __init__(self, options: HttpOptions) -> None:
        self.base_url = normalise_url(options.base_url)
        headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
        timeout = httpx2.Timeout(options.timeout_s, connect=CONNECT_TIMEOUT_S)
        self._client = httpx2.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout,
                                          trust_env=False)

    async def get_json(self, path: str) -> Any:
        """GET `path` as JSON; None when the server has no such endpoint (404/405/501) or the body
        is not JSON, which is how capability detection asks "do you speak this?"."""
        try:
            response = await self._client.get(path)
        except httpx2.HTTPError as exc:
            raise ModelLoadError(transport_problem(exc, self.base_url)) from None
        if response.status_code in (401, 403):
            raise ModelLoadError(status_problem(response.status_code, response.text, self.base_url))
        if response.status_code >= 400:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    async def post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST a request that answers in one JSON object."""
        try:
            response = await self._client.post(path, json=body)
        except httpx2.HTTPError as exc:
            raise EngineError(transport_problem(exc, self.base_url)) from None
        if response.status_code >= 400:
            raise EngineError(status_problem(response.status_code, response.text, self.base_url))
        try:
            value = response.json()
        except ValueError:
            raise EngineError(f"The server at {self.base_url} answered with something that is not JSON.") from None
        if not isinstance(value, dict):
            raise EngineError(f"The server at {self.base_url} answered with JSON that is not an object.")
        return value

    @contextlib.asynccontextmanager
    async def stream(self, path: str, body: dict[str, Any]) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """POST a streaming request; yields the JSON objects of its events. Leaving the block
        closes the connection at once, which is how a cancel reaches the server."""
        try:
            async with self._client.stream("POST", path, json=body) as response:
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")
                    raise EngineError(status_problem(response.status_code, text, self.base_url))
                yield _guarded(data_objects(lines_of(response.aiter_bytes())), self.base_url)
        except httpx2.HTTPError as exc:
            raise EngineError(transport_problem(exc, self.base_url)) from None

    async def close(self) -> None:
        await self._client.aclose()


async def _guarded(objects: AsyncIterator[dict[str, Any]], base_url: str) -> AsyncIterator[dict[str, Any]]:
    """Transport failures while reading (a cut stream, a read timeout) as one EngineError line."""
    try:
        async for item in objects:
            yield item
    except httpx2.HTTPError as exc:
        raise EngineError(transport_problem(exc, base_url, reading=True)) from None


def transport_problem(exc: httpx2.HTTPError, base_url: str, *, reading: bool = False) -> str:
    """One line for a failure below HTTP: nothing listening, a timeout, a connection cut."""
    if isinstance(exc, httpx2.ConnectTimeout):
        return f"The server at {base_url} did not answer within {CONNECT_TIMEOUT_S:.0f} s."
    if isinstance(exc, httpx2.ConnectError):
        return f"Cannot reach the server at {base_url} (is it running?)."
    if isinstance(exc, httpx2.TimeoutException):
        return f"The server at {base_url} went silent (timed out{' mid-reply' if reading else ''})."
    if isinstance(exc, (httpx2.RemoteProtocolError, httpx2.ReadError)) or reading:
        return f"The server at {base_url} cut the connection{' mid-reply' if reading else ''}."
    return f"Talking to the server at {base_url} failed: {type(exc).__name__}."


def status_problem(status: int, body: str, base_url: str) -> str:
    """One line for an HTTP error status, with the server's own reason when it gave one."""
    reason = _server_reason(body)
    known = {
        401: "refused the API key (401): set the key's environment variable ([engine] api_key_env)",
        403: "refused access (403)",
        404: "has no such endpoint or model (404)",
        429: "is busy: too many requests (429), try again shortly",
    }
    what = known.get(status, f"failed with HTTP {status}")
    return f"The server at {base_url} {what}" + (f": {reason}" if reason else ".")


def _server_reason(body: str) -> str:
    """The error message an OpenAI-style body carries ({"error": "..."} or {"error": {"message"}}),
    cut to one short line."""
    try:
        value = json.loads(body)
    except ValueError:
        value = body
    if isinstance(value, dict):
        error = value.get("error", value.get("message", value.get("detail", "")))
        value = error.get("message", "") if isinstance(error, dict) else error
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in str(value)).split())  # data, not control
    return text if len(text) <= 120 else text[:117] + "..."
