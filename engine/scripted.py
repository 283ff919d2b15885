"""`ScriptedEngine`: the test double that ships beside the real engine (like httpx's MockTransport).

It implements `engine.core.api.EngineAPI` with scripted replies instead of a model, so the TUI, the
CLI and their tests exercise the real public API without MLX, weights or threads. It is honest
about what it fakes: each scripted token carries its own raw probability and alternatives; the
"sampled" probabilities are the listed candidates re-weighted by temperature and renormalised,
not the real sampling chain (that one is tested against the real engine).

Behaviours a caller can rely on, because the real engine has them too:

- `generate` yields `TokenEvent`s then exactly one `TurnFinished`; `max_tokens` stops with
  "length", `cancel()` stops within one token with "cancelled".
- `set_params` applies from the next token (`params_seen` records what each token used).
- `continue_last=True` continues a partial reply: indices start at ``len(token_ids)``.
- the prompt is "tokenized" into ids and the longest common prefix with the previous turn is
  reported as reused, so cache statistics look like the real ones.
- `score` and `probe` read the same scripted prompt: each word's raw probability and alternatives
  come from `scored` (a `ScriptedToken` per word; any other word has probability `SCORED_PROB`
  and no alternative), with the perplexities of `engine.core.api.perplexity`. `scoring=False`
  makes a model that cannot score (as a server without prompt logprobs), with its one line why.

`hold_after=n` stops each reply after its n-th token until `release()`: a test that must see a
reply mid-stream catches it there instead of racing a timer (a busy CPU can stall the test's poll
longer than a whole fast reply takes).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field, replace
from typing import AsyncGenerator, Sequence, Union

from engine.core.api import (
    FinishReason,
    NO_MODEL,
    Abilities,
    Candidate,
    ContextLimitError,
    EngineError,
    EngineEvent,
    GenerateRequest,
    LoadProgress,
    Message,
    ModelInfo,
    ModelLoadError,
    Preview,
    PreviewEvent,
    PreviewFinished,
    PreviewRequest,
    PreviewToken,
    ProbeRequest,
    ProbeResult,
    ProgressCallback,
    SamplingParams,
    MessageScore,
    Scored,
    ScoreRequest,
    StageRequest,
    StageView,
    TokenEvent,
    TurnFinished,
    check_probe_request,
    check_score_request,
    perplexity,
)

__all__ = ["ScriptedEngine", "ScriptedToken", "DEMO_SCRIPT", "ReplySpec", "SCORED_PROB", "NO_SCORING"]

SCORED_PROB = 0.25  # the raw probability of a scored word the script says nothing about
NO_SCORING = "This scripted model cannot score the text it reads (as a server without prompt logprobs)."


@dataclass(frozen=True)
class ScriptedToken:
    """One scripted token: its text, its raw probability and the alternatives the model 'saw'."""

    text: str
    prob: float = 0.9
    alternatives: tuple[tuple[str, float], ...] = ()


ReplySpec = Sequence[Union[str, ScriptedToken]]

# A small conversation for demos, screenshots and the tmux test (`--fake-engine`).
DEMO_SCRIPT: tuple[ReplySpec, ...] = (
    (
        ScriptedToken("Hello", 0.62, (("Hi", 0.21), ("Hey", 0.08), ("Greetings", 0.03))),
        ScriptedToken("!", 0.71, ((",", 0.18), (".", 0.06))),
        " I", " am", " a",
        ScriptedToken(" scripted", 0.05, ((" small", 0.4), (" tiny", 0.3), (" demo", 0.15))),
        " model", ".", "\n\n", "-", " I", " show", " **", "candidates", "**", "\n",
        "-", " and", ScriptedToken(" branches", 0.34, ((" probabilities", 0.33), (" colours", 0.2))),
        ".",
    ),
    (
        "Sure", ",", " here", " is", " a", ScriptedToken(" list", 0.45, ((" poem", 0.3),)), ":", "\n\n",
        "1", ".", " one", "\n", "2", ".", " two", "\n", "3", ".",
        ScriptedToken(" three", 0.97, ((" four", 0.01),)),
    ),
)


def _as_token(spec: str | ScriptedToken) -> ScriptedToken:
    return spec if isinstance(spec, ScriptedToken) else ScriptedToken(spec)


@dataclass
class _Vocab:
    """Text <-> id, grown on demand so every distinct scripted text gets one stable id."""

    ids: dict[str, int] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)

    def id_of(self, text: str) -> int:
        if text not in self.ids:
            self.ids[text] = len(self.texts)
            self.texts.append(text)
        return self.ids[text]

    def text_of(self, token_id: int) -> str:
        """The text of an id (one this double never made, e.g. a replayed real reply's: "<id>")."""
        return self.texts[token_id] if 0 <= token_id < len(self.texts) else f"<{token_id}>"

    def encode(self, text: str) -> list[int]:
        """A crude word-level tokenization, enough to make prefix reuse observable."""
        return [self.id_of(word) for word in text.replace("\n", " \n ").split(" ") if word]


def _sampled(probs: list[float], params: SamplingParams) -> list[float]:
    """Temperature over the listed candidates, renormalised (greedy at temperature 0)."""
    if params.temperature == 0:
        best = max(range(len(probs)), key=probs.__getitem__)
        return [1.0 if i == best else 0.0 for i in range(len(probs))]
    weights = [p ** (1.0 / params.temperature) if p > 0 else 0.0 for p in probs]
    total = sum(weights) or 1.0
    return [w / total for w in weights]


def _entropy(probs: list[float]) -> float:
    """Entropy of the listed candidates plus the leftover mass counted as one outcome."""
    rest = max(0.0, 1.0 - sum(probs))
    return -sum(p * math.log(p) for p in [*probs, rest] if p > 0)


class ScriptedEngine:
    """An `EngineAPI` that replays scripted replies (cycling through `replies`)."""

    def __init__(
        self,
        replies: Sequence[ReplySpec] = DEMO_SCRIPT,
        *,
        token_delay: float = 0.0,
        load_delay: float = 0.0,
        load_error: str | None = None,
        context_limit: int = 4096,
        name: str = "scripted-demo",
        supports_thinking: bool = False,
        has_chat_template: bool = True,
        opens_thinking: bool = False,
        drops_past_thinking: bool = False,
        hold_after: int | None = None,
        scored: dict[str, ScriptedToken] | None = None,
        scoring: bool = True,
    ) -> None:
        self.replies = [[_as_token(t) for t in reply] for reply in replies] or [[_as_token("…")]]
        self.token_delay = token_delay
        self.load_delay = load_delay
        self.load_error = load_error
        self.context_limit = context_limit
        self.name = name
        self.supports_thinking = supports_thinking  # what ModelInfo says (the script ignores the switch)
        self.has_chat_template = has_chat_template  # what ModelInfo says (a plain-text model's welcome)
        self.opens_thinking, self.drops_past_thinking = opens_thinking, drops_past_thinking  # likewise
        self.requests: list[GenerateRequest] = []  # every request seen, for assertions
        self.preview_requests: list[PreviewRequest] = []  # every preview request seen
        self.stage_requests: list[StageRequest] = []  # every stage view asked
        self.change_lag = 0  # tokens later than applied that `TurnFinished.params_changes` says (tests' pipelining)
        self.prepared: list[tuple[Message, ...]] = []  # every conversation `prepare` was given
        self.drafts: list[str] = []  # and the draft that came with it
        self.prepare_scores: list[int | None] = []  # and the score_candidates
        self.params_seen: list[SamplingParams] = []  # the params each yielded token used
        self.closed = False
        self.fail_next: EngineError | None = None  # raise this from the next `generate`
        self._model: ModelInfo | None = None
        self._params = SamplingParams()
        self._cancel = asyncio.Event()
        self._vocab = _Vocab()
        self._cache: list[int] = []
        self._turn = 0
        self.hold_after = hold_after
        self._released = asyncio.Event()
        self.scored = dict(scored or {})  # word -> its scripted statistics when scored
        self.scoring = scoring  # False: the model declares it cannot score nor probe
        self.score_requests: list[ScoreRequest] = []  # every score request seen
        self.probe_requests: list[ProbeRequest] = []  # every probe request seen

    @property
    def model(self) -> ModelInfo | None:
        return self._model

    async def load(
        self, model: str, *, trust_remote_code: bool = False, on_progress: ProgressCallback | None = None
    ) -> ModelInfo:
        """Pretend to load in a few steps (so progress UIs can be tested), or fail as scripted.

        Like the real engine, the old model stays until the new one is in: after a failed load the
        previous one is still loaded (and `model` is None only while the load runs).
        """
        previous, self._model = self._model, None
        for step in range(1, 5):
            if on_progress is not None:
                on_progress(LoadProgress(f"loading {model}", step / 4))
            await asyncio.sleep(self.load_delay / 4)
        if self.load_error is not None:
            self._model = previous
            raise ModelLoadError(self.load_error)
        self._model = ModelInfo(
            name=self.name if model == "demo" else model, path=f"/scripted/{model}",
            context_limit=self.context_limit, vocab_size=32000, has_chat_template=self.has_chat_template,
            parameters=1_000_000, dtype="float32", blas="scripted", supports_thinking=self.supports_thinking,
            opens_thinking=self.opens_thinking, drops_past_thinking=self.drops_past_thinking,
            abilities=Abilities() if self.scoring else Abilities(
                scoring=False, probes=False, why=(("scoring", NO_SCORING), ("probes", NO_SCORING))),
        )
        return self._model

    def prepare(self, messages: Sequence[Message], draft: str = "", thinking: bool | None = None,
                score_candidates: int | None = None) -> asyncio.Future[int]:
        """Like the real engine, "warm" the cache with the conversation (its ids here) and the
        draft's whole words, if loaded (the scripted prompt has no thinking switch)."""
        self.prepared.append(tuple(messages))
        self.drafts.append(draft)
        self.prepare_scores.append(score_candidates)
        warmed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        loaded = self._model is not None and not self.closed
        if loaded:
            ids = self._prompt_ids(GenerateRequest(tuple(messages), self._params)) if messages else []
            if draft:
                ids += [self._vocab.id_of("<|user|>"), *self._vocab.encode(draft)[:-1]]
            self._cache = ids
        warmed.set_result(len(self._cache) if loaded else 0)
        return warmed

    async def count_tokens(self, messages: Sequence[Message], thinking: bool | None = None) -> int:
        """The scripted prompt's length: a role marker per message plus its words (or its ids);
        the scripted prompt has no thinking switch."""
        if self._model is None or self.closed:
            raise EngineError(NO_MODEL)
        return len(self._prompt_ids(GenerateRequest(tuple(messages), self._params)))

    def set_params(self, params: SamplingParams) -> None:
        self._params = params

    def cancel(self) -> None:
        self._cancel.set()
        self._released.set()

    def release(self) -> None:
        """Let a reply held at `hold_after` go on (and every later one run through)."""
        self._released.set()

    async def close(self) -> None:
        self.closed = True
        self._cancel.set()

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        return self._generate(request)

    async def _generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """One turn: check the request like the real engine, then replay the next script."""
        self._check(request)
        self.requests.append(request)
        self._params = request.params
        self._cancel.clear()
        prompt_ids = self._prompt_ids(request)
        reused = self._reuse(prompt_ids)
        if not request.continue_last:  # a continuation replays the script it branched from
            self._turn += 1
        script = self.replies[(self._turn - 1) % len(self.replies)]
        start = len(request.messages[-1].token_ids or ()) if request.continue_last else 0
        ids = list(request.messages[-1].token_ids or ()) if request.continue_last else []
        text = request.messages[-1].text if request.continue_last else ""
        reason = "stop"
        changes: list[tuple[int, SamplingParams]] = []  # where `set_params` applied, as the real engine says
        drawn_with = request.params
        await asyncio.sleep(0)
        for n, token in enumerate(script[start:]):
            if self._cancel.is_set():
                reason = "cancelled"
                break
            if n >= self._params.max_tokens:
                reason = "length"
                break
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            if self._params is not drawn_with:
                if self._params != drawn_with:
                    changes.append((start + n + self.change_lag, self._params))
                drawn_with = self._params
            event = self._event(start + n, token, self._params)
            self.params_seen.append(self._params)
            ids.append(event.id)
            text += event.text
            yield event
            if n + 1 == self.hold_after:
                await self._released.wait()
        self._cache = prompt_ids + ids[start:]
        yield replace(self._finished(request, prompt_ids, reused, ids, text, reason, len(ids) - start),
                      params_changes=tuple(changes))

    def preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        return self._preview(request)

    async def _preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        """Each row is what `request.branch(candidate)` replays here: the script the reply came
        from, after the candidate's position (so, as with the real engine, choosing a candidate
        continues exactly as its preview showed). Tokens stream one step for every row at a time."""
        last = request.messages[-1] if request.messages else None
        if last is None or last.role != "assistant" or last.token_ids is None:
            raise EngineError("A preview needs a conversation that ends with a reply's exact token ids.")
        if self.closed or self._model is None:  # `fail_next` is left for the next turn
            raise EngineError("the engine is closed" if self.closed else "no model loaded")
        if not request.candidates:
            raise EngineError("A preview takes 1 to 16 candidates, got 0.")
        self.preview_requests.append(request)
        start = len(last.token_ids) + 1
        script = self.replies[(max(self._turn, 1) - 1) % len(self.replies)][start:]
        shown = script[: request.tokens]
        for n, token in enumerate(shown):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            stats = self._event(n, token, request.params) if request.params.candidates else None
            for row, candidate in enumerate(request.candidates):
                yield PreviewToken(row, candidate, n, self._vocab.id_of(token.text), token.text,
                                   math.log(max(token.prob, 1e-12)), stats)
        ids = tuple(self._vocab.id_of(token.text) for token in shown)
        text = "".join(token.text for token in shown)
        reason: FinishReason = "length" if len(script) > request.tokens else "stop"
        yield PreviewFinished(tuple(Preview(c, ids, text, reason) for c in request.candidates), 0.0)

    async def score(self, request: ScoreRequest) -> Scored:
        """The scripted prompt's words, each scored from `scored` (see the module docstring)."""
        self._check_scoring()
        check_score_request(request)
        self.score_requests.append(request)
        await asyncio.sleep(0)
        ids, spans = self._score_ids(request)
        if len(ids) > self.context_limit:
            raise ContextLimitError(f"The text is {len(ids)} tokens but the context limit is {self.context_limit}.")
        reused = self._reuse(ids)
        self._cache = list(ids)
        tokens = tuple(self._scored_event(position, self._vocab.text_of(ids[position]), request.candidates)
                       for position in range(1, len(ids)))
        messages = tuple(self._message_score(number, start, end, tokens) for number, (start, end) in enumerate(spans))
        chat = [t.logprob for m in messages for t in tokens[max(m.start - 1, 0):max(m.end - 1, 0)]]
        whole = perplexity(chat) if request.text is None else perplexity([t.logprob for t in tokens])
        return Scored(tuple(ids), tokens, messages, whole, reused, 0.0)

    async def probe(self, request: ProbeRequest) -> tuple[ProbeResult, ...]:
        """Each phrase's words scored from `scored`, at the given position of the scripted prompt."""
        self._check_scoring()
        check_probe_request(request)
        self.probe_requests.append(request)
        await asyncio.sleep(0)
        ids, _ = self._score_ids(request.context)
        if request.position > len(ids):
            raise EngineError(f"Probe position {request.position} is past the text's {len(ids)} tokens.")
        results = []
        for phrase in request.phrases:
            words = self._vocab.encode(phrase) or [self._vocab.id_of(phrase)]
            events = [self._scored_event(n, self._vocab.text_of(word), 0) for n, word in enumerate(words)]
            logprobs = tuple(event.logprob for event in events)
            results.append(ProbeResult(phrase, tuple(words), tuple(e.piece for e in events), logprobs,
                                       math.fsum(logprobs), events[0].rank or 1))
        return tuple(results)

    def _check_scoring(self) -> None:
        if self.closed:
            raise EngineError("the engine is closed")
        if self._model is None:
            raise EngineError(NO_MODEL)
        if not self.scoring:
            raise EngineError(NO_SCORING)

    def _score_ids(self, request: ScoreRequest) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids `request` reads and each message's (start, end) span in them."""
        if request.text is not None:
            return self._vocab.encode(request.text) or [self._vocab.id_of(request.text)], []
        ids: list[int] = []
        spans = []
        for message in request.messages:
            ids.append(self._vocab.id_of(f"<|{message.role}|>"))
            start = len(ids)
            ids.extend(message.token_ids if message.token_ids is not None else self._vocab.encode(message.text))
            spans.append((start, len(ids)))
        return ids, spans

    def _scored_event(self, position: int, text: str, candidates: int) -> TokenEvent:
        """A read word's TokenEvent: its scripted probability and alternatives, nothing sampled."""
        token = self.scored.get(text, ScriptedToken(text, SCORED_PROB))
        listed = sorted([(token.text, token.prob), *token.alternatives], key=lambda c: -c[1])
        probs = [p for _, p in listed]
        return TokenEvent(
            index=position, id=self._vocab.id_of(text), text=text, piece=text,
            logprob=math.log(max(token.prob, 1e-12)), sampled_prob=None,
            rank=1 + sum(p > token.prob for p in probs), entropy=_entropy(probs),
            candidates=tuple(Candidate(self._vocab.id_of(t), t, math.log(max(p, 1e-12)), None)
                             for t, p in listed[:candidates]),
        )

    @staticmethod
    def _message_score(number: int, start: int, end: int, tokens: tuple[TokenEvent, ...]) -> MessageScore:
        own = [t.logprob for t in tokens[max(start - 1, 0):max(end - 1, 0)]]
        return MessageScore(number, start, end, len(own), perplexity(own))

    async def token_ids(self, text: str) -> tuple[int, ...]:
        """A scripted text is one token (its own id); other text splits as `_Vocab.encode` does."""
        if self.closed or self._model is None:
            raise EngineError("the engine is closed" if self.closed else NO_MODEL)
        if text in self._vocab.ids or any(_as_token(t).text == text for script in self.replies for t in script):
            return (self._vocab.id_of(text),)
        return tuple(self._vocab.encode(text))

    async def stages(self, request: StageRequest) -> StageView:
        """The stage view of a scripted token: its own (fake) chain, the listed candidates
        re-weighted by temperature, so "final" is exactly the sampled column its event showed."""
        if self.closed or self._model is None:
            raise EngineError("the engine is closed" if self.closed else NO_MODEL)
        await asyncio.sleep(0)
        self.stage_requests.append(request)
        prefix = list(request.messages[-1].token_ids or ()) if request.continue_last else []
        ids = prefix + list(request.tokens)
        # the script that wrote this token at this place (a branch continues its script after the
        # candidate chosen by hand, so only the token itself is matched)
        token = next((_as_token(script[len(ids) - 1]) for script in self.replies if len(script) >= len(ids)
                      and self._vocab.id_of(_as_token(script[len(ids) - 1]).text) == ids[-1]), None)
        if token is None:
            raise EngineError("The replay does not match this reply: no script wrote these tokens.")
        event = self._event(len(ids) - 1, token, request.params.with_changes(candidates=100))
        probs = {c.id: math.exp(c.logprob) for c in event.candidates}
        sampled = {c.id: c.sampled_prob or 0.0 for c in event.candidates}
        shown = tuple(dict.fromkeys([*request.candidates, event.id]))
        removed = tuple("temperature" if sampled.get(c, 0.0) == 0.0 else "" for c in shown)
        stages = (("model", tuple(probs.get(c, 0.0) for c in shown)),
                  ("temperature", tuple(sampled.get(c, 0.0) for c in shown)),
                  ("final", tuple(sampled.get(c, 0.0) for c in shown)))
        return StageView(shown, stages, removed, event.id,
                         tuple(math.log(probs[c]) if probs.get(c) else -math.inf for c in shown))

    def _check(self, request: GenerateRequest) -> None:
        if self.closed:
            raise EngineError("the engine is closed")
        if self._model is None:
            raise EngineError("no model loaded")
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        if not request.messages:
            raise EngineError("nothing to answer: the conversation is empty")
        last = request.messages[-1]
        if request.continue_last and last.role != "assistant":
            raise EngineError("continue_last needs a partial assistant message last")
        prompt = len(self._prompt_ids(request))
        if prompt >= self.context_limit:  # like the real engine: room for one new token at least
            raise ContextLimitError(f"The conversation is {prompt} tokens but the context limit is "
                                    f"{self.context_limit}.")

    def _prompt_ids(self, request: GenerateRequest) -> list[int]:
        ids: list[int] = []
        for message in request.messages:
            ids.append(self._vocab.id_of(f"<|{message.role}|>"))
            ids.extend(message.token_ids if message.token_ids is not None else self._vocab.encode(message.text))
        return ids

    def _reuse(self, prompt_ids: list[int]) -> int:
        shared = 0
        for a, b in zip(self._cache, prompt_ids):
            if a != b:
                break
            shared += 1
        return shared

    def _event(self, index: int, token: ScriptedToken, params: SamplingParams) -> TokenEvent:
        """A TokenEvent whose numbers follow the api.py definitions over the listed candidates."""
        listed = sorted([(token.text, token.prob), *token.alternatives], key=lambda c: -c[1])
        probs = [p for _, p in listed]
        sampled = _sampled(probs, params)
        candidates = tuple(
            Candidate(self._vocab.id_of(t), t, math.log(max(p, 1e-12)), s)
            for (t, p), s in zip(listed, sampled)
        )[: params.candidates]
        chosen = next(i for i, (t, _) in enumerate(listed) if t == token.text)
        return TokenEvent(
            index=index, id=self._vocab.id_of(token.text), text=token.text, piece=token.text,
            logprob=math.log(max(token.prob, 1e-12)), sampled_prob=sampled[chosen],
            rank=1 + sum(p > token.prob for p in probs), entropy=_entropy(probs), candidates=candidates,
        )

    def _finished(self, request: GenerateRequest, prompt_ids: list[int], reused: int, ids: list[int],
                  text: str, reason: str, generated: int) -> TurnFinished:
        return TurnFinished(
            prompt_ids=tuple(prompt_ids), prompt_tokens=len(prompt_ids), reused_tokens=reused,
            prefilled_tokens=len(prompt_ids) - reused, generated_tokens=generated, token_ids=tuple(ids),
            text=text, ttft_s=0.012, prefill_tps=1500.0, decode_tps=250.0,
            finish_reason=reason,  # type: ignore[arg-type]
            context_used=len(prompt_ids) + generated, context_limit=self.context_limit,
        )
