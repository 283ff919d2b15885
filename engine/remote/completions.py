"""A turn as token ids through ``/v1/completions`` (vLLM, llama.cpp): exact history, branches and
live parameters, on servers that take ``prompt: [ids]``.

The prompt is rendered here (`engine.remote.tokens`), each earlier reply as its exact ids, so the
server's prefix cache (vLLM's automatic prefix caching, llama.cpp's ``cache_prompt``) reuses the
history. A branch is the prompt plus the reply up to a token plus the chosen id. A parameter
changed mid-reply ends the stream and continues from the ids received so far with the new
parameters (the prefix cache makes that cheap); cancel closes the stream at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.core.api import (
    EngineError,
    EngineEvent,
    FinishReason,
    GenerateRequest,
    SamplingParams,
)
from engine.remote.capabilities import Capabilities
from engine.remote.events import TurnClock, TurnOutcome, token_event, turn_finished
from engine.remote.http import HttpClient
from engine.remote.tokens import ServerTokenizer
from engine.remote.waiting import Deadline, until
from engine.remote.wire import (
    Alternative,
    TokenRecord,
    finish_reason,
    records,
    sampling_fields,
    usage_counts,
)


@dataclass
class _Progress:
    """What a turn has so far, across the requests that continue it."""

    ids: list[int] = field(default_factory=list)  # generated this turn
    texts: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    cached: int = 0
    requests: int = 0
    reason: FinishReason | None = None


@dataclass(frozen=True)
class IdsTurn:
    """One turn of `RemoteEngine` in token-id mode."""

    client: HttpClient
    caps: Capabilities
    tokenizer: ServerTokenizer
    wire_model: str
    params: Callable[[], SamplingParams]  # the live parameters (set_params changes them)
    cancel: asyncio.Event
    interrupt: asyncio.Event  # set by cancel and by set_params: stop reading now
    deadline: Deadline | None = None  # the whole turn's (`RemoteEngine`: [engine] turn_timeout_s)

    async def run(self, request: GenerateRequest) -> AsyncIterator[EngineEvent]:
        prompt = await self.tokenizer.render(request.messages, request.continue_last)
        start = len(request.messages[-1].token_ids or ()) if request.continue_last else 0
        prefix = list(request.messages[-1].token_ids or ()) if request.continue_last else []
        clock, done = TurnClock(), _Progress()
        while done.reason is None:
            params = self.params()
            async for event in self._request(prompt + done.ids, params, start, done, clock):
                yield event
            if done.reason is None and self.params() is params:
                raise EngineError(f"The server at {self.client.base_url} cut the connection mid-reply "
                                  "(the stream ended without a finish reason).")
        outcome = TurnOutcome(tuple(prompt), done.prompt_tokens or len(prompt), min(done.cached, len(prompt)),
                              tuple(prefix + done.ids), len(done.ids), "".join(done.texts), done.reason,
                              self.caps.context_limit)
        yield turn_finished(outcome, clock)

    async def _request(self, prompt: list[int], params: SamplingParams, start: int, done: _Progress,
                       clock: TurnClock) -> AsyncIterator[EngineEvent]:
        """One streamed request; returns early (reason still None) when the parameters change."""
        left = params.max_tokens - len(done.ids)
        if left <= 0:
            done.reason = "length"
            return
        body = self._body(prompt, params.with_changes(max_tokens=left))
        self.interrupt.clear()
        done.requests += 1
        if self.cancel.is_set():
            done.reason = "cancelled"
            return
        async with self.client.stream("/v1/completions", body) as objects:
            async for obj in until(objects, self.interrupt, self.deadline):
                if done.requests == 1:  # the first request's counts describe the turn's prompt
                    done.prompt_tokens, done.cached = usage_counts(obj) or (done.prompt_tokens, done.cached)
                events = self._events(obj, start + len(done.ids), params.candidates)
                room = params.max_tokens - len(done.ids)
                for event in events[:room]:
                    clock.tick()
                    done.ids.append(event.id)
                    done.texts.append(event.text)
                    yield event
                choice = (obj.get("choices") or [None])[0]
                done.reason = (finish_reason(choice) if isinstance(choice, dict) else None) or done.reason
                if len(done.ids) >= params.max_tokens:  # a server that ignores max_tokens stops here
                    done.reason = "length" if len(events) > room or done.reason is None else done.reason
                    break
                if self.params() is not params and done.reason is None:
                    return  # new parameters from the next token: continue from here
            if self.cancel.is_set():
                done.reason = "cancelled"

    def _body(self, prompt: list[int], params: SamplingParams) -> dict[str, Any]:
        top_n = min(params.candidates, self.caps.top_limit)
        body: dict[str, Any] = {"model": self.wire_model, "prompt": prompt, "stream": True,
                                "stream_options": {"include_usage": True}, **sampling_fields(params, top_n, self.caps.kind)}
        body["logprobs"] = max(top_n, 1)  # /v1/completions: how many per position (the chosen one always)
        body.pop("top_logprobs", None)
        if self.caps.kind == "vLLM":
            body["return_tokens_as_token_ids"] = True
        if self.caps.kind == "llama.cpp":
            body.update(cache_prompt=True, n_probs=top_n, post_sampling_probs=False)
        return body

    def _events(self, obj: dict[str, Any], index: int, candidates: int) -> list[EngineEvent]:
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices:
            return []
        choice = choices[0]
        if not isinstance(choice, dict):
            raise EngineError("The server sent a malformed choice (not an object).")
        text = choice.get("text") if isinstance(choice.get("text"), str) else ""
        found = [self._named(r) for r in records(choice)]
        if text and not found:
            raise EngineError("The server streamed a token without its logprobs: it cannot be inspected.")
        if any(r.id is None for r in found):
            raise EngineError("The server sent a token without its id: token-id mode cannot follow it.")
        return [token_event(index + i, r, text if i == len(found) - 1 else "", candidates)
                for i, r in enumerate(found)]

    def _named(self, record: TokenRecord) -> TokenRecord:
        """Text for what the server named by id only (vLLM's ``token_id:N``), from our tokenizer."""
        top = tuple(Alternative(a.id, a.token or (self.tokenizer.text_of(a.id) if a.id is not None else ""), a.logprob)
                    for a in record.top)
        token = record.token or (self.tokenizer.text_of(record.id) if record.id is not None else "")
        return TokenRecord(record.id, token, record.logprob, top)
