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
from engine.remote.sse import data_objects, lines_of

CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class HttpOptions:
    """Where the server is and how long to wait for it."""

    base_url: str  # e.g. "http://127.0.0.1:8080" (a trailing "/v1" is accepted and dropped)
    api_key: str = ""  # sent as a Bearer token when set; read from the environment, never stored
    timeout_s: float = 60.0  # the longest silence tolerated while reading (a long prompt, a slow token)


def normalise_url(url: str) -> str:
    """``host:port``, ``http://host:port/``, ``.../v1``: one canonical base URL, or one error line."""
    text = url.strip().rstrip("/")
    if not text:
        raise EngineError("--server needs a URL, e.g. http://127.0.0.1:8080")
    if "://" not in text:
        text = "http://" + text
    if not text.startswith(("http://", "https://")):
        raise EngineError(f"--server must be an http:// or https:// URL, not {url[:60]!r}")
    return text.removesuffix("/v1")


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
