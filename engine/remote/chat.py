"""A turn through ``/v1/chat/completions``: for servers that take no token-id prompts
(mlx_lm.server) or when the model's tokenizer is not here. The server renders the prompt from
the messages' text, so the history is text (not the exact ids), a reply cannot be continued
(no branching) and parameters apply from the next reply.

Streamed where the server streams logprobs; otherwise (mlx_lm.server) asked in one request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from engine.core.api import (
    EngineError,
    EngineEvent,
    FinishReason,
    GenerateRequest,
    SamplingParams,
    TokenEvent,
)
from engine.remote.capabilities import Capabilities
from engine.remote.events import (
    TurnClock,
    TurnOutcome,
    piece_text,
    token_event,
    turn_finished,
)
from engine.remote.http import HttpClient
from engine.remote.tokens import ServerTokenizer
from engine.remote.waiting import Deadline, or_stopped, until
from engine.remote.wire import (
    TokenRecord,
    chat_messages,
    finish_reason,
    greedy_choice,
    records,
    sampling_fields,
    usage_counts,
)


@dataclass
class _Progress:
    """What the turn has so far."""

    ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    usage: tuple[int, int] | None = None
    reason: FinishReason | None = None
    clock: TurnClock = field(default_factory=TurnClock)

    def add(self, event: TokenEvent) -> TokenEvent:
        self.clock.tick()
        self.ids.append(event.id)
        self.texts.append(event.text)
        return event


@dataclass(frozen=True)
class ChatTurn:
    """One turn of `RemoteEngine` over the chat endpoint."""

    client: HttpClient
    caps: Capabilities
    tokenizer: ServerTokenizer | None  # when here: the text of ids the server sends bare
    wire_model: str
    cancel: asyncio.Event
    deadline: Deadline | None = None  # the whole turn's (`RemoteEngine`: [engine] turn_timeout_s)

    async def run(self, request: GenerateRequest) -> AsyncIterator[EngineEvent]:
        done = _Progress()
        body = self._body(request)
        steps = self._streamed(body, request.params, done) if self.caps.stream_logprobs else \
            self._whole(body, request.params, done)
        async for event in steps:
            yield event
        prompt, cached = done.usage or (0, 0)
        reason: FinishReason = done.reason or "stop"
        yield turn_finished(TurnOutcome((), prompt, cached, tuple(done.ids), len(done.ids), "".join(done.texts),
                                        reason, self.caps.context_limit), done.clock)

    def _body(self, request: GenerateRequest) -> dict[str, Any]:
        top_n = min(request.params.candidates, self.caps.top_limit)
        if self.caps.kind == "mlx_lm.server" and request.params.temperature > 0:
            top_n = 0  # see `_whole_events`: its top-N hide which token was chosen
        return {"model": self.wire_model, "messages": chat_messages(request.messages),
                **sampling_fields(request.params, top_n, self.caps.kind)}

    async def _streamed(self, body: dict[str, Any], params: SamplingParams,
                        done: _Progress) -> AsyncIterator[EngineEvent]:
        body.update(stream=True, stream_options={"include_usage": True})
        async with self.client.stream("/v1/chat/completions", body) as objects:
            async for obj in until(objects, self.cancel, self.deadline):
                done.usage = usage_counts(obj) or done.usage
                events = _chunk_events(obj, len(done.ids), params.candidates)
                room = params.max_tokens - len(done.ids)
                for event in events[:room]:
                    yield done.add(event)
                done.reason = _reason(obj) or done.reason
                if len(done.ids) >= params.max_tokens:  # a server that ignores max_tokens stops here
                    done.reason = "length" if len(events) > room or done.reason is None else done.reason
                    break
            if self.cancel.is_set():
                done.reason = "cancelled"
        if done.reason is None:  # an HTTP/1.0 stream cut ends like a finished one: only this tells
            raise EngineError(f"The server at {self.client.base_url} cut the connection mid-reply "
                              "(the stream ended without a finish reason).")

    async def _whole(self, body: dict[str, Any], params: SamplingParams, done: _Progress) -> AsyncIterator[EngineEvent]:
        done.clock.whole = True
        obj = await or_stopped(self.client.post_json("/v1/chat/completions", body), self.cancel, self.deadline)
        if obj is None:
            done.reason = "cancelled"
            return
        done.usage, done.reason = usage_counts(obj), _reason(obj) or "stop"
        events = self._whole_events(obj, params)
        for event in events[: params.max_tokens]:
            yield done.add(event)
        if len(events) > params.max_tokens:  # a server that ignores max_tokens: cut where we asked
            done.reason = "length"
        else:
            done.texts = [_message_text(obj)]  # the reply's text is the server's own

    def _whole_events(self, obj: dict[str, Any], params: SamplingParams) -> list[TokenEvent]:
        """A whole reply's tokens (mlx_lm.server).

        mlx_lm.server (0.32.2) labels each position with an arbitrary member of its top-N (the
        first of an unordered `argpartition`) once top_logprobs is asked for, not with the token
        it chose; without top_logprobs it sends the chosen ids and logprobs exactly. So the top-N
        are asked for only at temperature 0, where the chosen token is the top-N's best."""
        choice = _choice(obj)
        found = records(choice) if choice is not None else []
        if not found and _message_text(obj):
            raise EngineError("The server sent a reply without its logprobs: it cannot be inspected.")
        if params.temperature == 0:
            found = [greedy_choice(r) for r in found]
        texts = self._texts(found, _message_text(obj))
        return [token_event(i, r, text, params.candidates) for i, (r, text) in enumerate(zip(found, texts))]

    def _texts(self, found: list[TokenRecord], reply: str) -> list[str]:
        """Each token's text: decoded here when the tokenizer is (mlx_lm.server sends bare ids
        without top_logprobs) and it spells the reply the server sent (a tokenizer found by the
        model's name may be another model's), else the raw piece each entry carries made
        readable, else "" for every token: unknown (said once at load), never the whole reply
        on one token."""
        if self.tokenizer is not None and found and all(r.id is not None for r in found):
            texts = self.tokenizer.texts([r.id for r in found])
            if reply.strip() in "".join(texts):  # a thinking model's reply holds less than its ids
                return texts
        return [piece_text(r.token) for r in found]


def _chunk_events(obj: dict[str, Any], index: int, candidates: int) -> list[TokenEvent]:
    """A stream chunk's tokens: each its own text when the entries' texts spell the chunk's
    content, else the content goes with the last of them."""
    choice = _choice(obj)
    if choice is None:
        return []
    delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
    text = delta.get("content") if isinstance(delta.get("content"), str) else ""
    found = records(choice)
    if text and not found:
        raise EngineError("The server streamed a token without its logprobs: it cannot be inspected.")
    if len(found) > 1 and "".join(r.token for r in found) == text:
        return [token_event(index + i, r, r.token, candidates) for i, r in enumerate(found)]
    return [token_event(index + i, r, text if i == len(found) - 1 else "", candidates) for i, r in enumerate(found)]


def _choice(obj: dict[str, Any]) -> dict[str, Any] | None:
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        return None
    if not isinstance(choices[0], dict):
        raise EngineError("The server sent a malformed choice (not an object).")
    return choices[0]


def _reason(obj: dict[str, Any]) -> FinishReason | None:
    choice = _choice(obj)
    return finish_reason(choice) if choice is not None else None  # type: ignore[return-value]


def _message_text(obj: dict[str, Any]) -> str:
    choice = _choice(obj) or {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content = message.get("content")
    return content if isinstance(content, str) else ""
