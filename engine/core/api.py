"""The narrow door between the engine and its callers: plain, frozen data and one protocol.

Everything that crosses between the engine thread and a caller (the TUI, the headless CLI, the
benchmark, tests) is defined here. Only plain Python values cross: ints, floats, strings, tuples.
No `mx.array` ever leaves the engine.

Commands go in as method calls on an `EngineAPI`; events come out of `EngineAPI.generate` as an
async stream of `TokenEvent`s closed by exactly one `TurnFinished` (or an `EngineError` is raised).

The conversation is owned by the caller and sent whole with every request (`GenerateRequest`).
The engine renders it with the model's chat template, finds the longest common token prefix with
what already sits in its KV cache, trims the cache to that prefix and prefills only the rest. So
regenerate, edit-and-resend and branch are all just "send a different conversation": whatever is
shared with the cache is reused, and `TurnFinished.reused_tokens` says how much.

## What the model saw is what it sees (the history rule)

What the model saw when it wrote a reply is what it sees of that reply later: turn k's
`prompt_ids` start with turn k-1's `prompt_ids` followed by its reply's ids (`Message.token_ids`).
Then come the template's own text after the reply (its end-of-turn marker placed right after the
reply, as a model that stops writes it), the new message and the generation prompt. Where a
template renders a reply in the history differently from what the model saw (a leading space,
trimmed whitespace, a stripped thinking block, another role header than its generation prompt),
the engine keeps what the model saw, deliberately: the earlier turns stay in the cache unchanged,
and the model is never conditioned on ids it did not produce after a prompt it was not given. So
a prompt may differ from `apply_chat_template` of the same chat after its first reply; the first
turn's ids are exactly `apply_chat_template(..., tokenize=True)`'s. Text between replies is
tokenized as the whole text would be (no start-of-text ``▁`` of SentencePiece-style tokenizers
in the middle of a prompt). Only an edit, a regenerate or a branch rewinds the cache, and only to
where the new conversation parts from the old one; for caches that cannot be trimmed (SSM and
hybrid models, wrapped sliding windows) the engine restores a snapshot taken at the newest turn
boundaries instead of reading the history again.

## What the probabilities mean (defined once, here)

For every generated token the engine computes, from the model's logits at that position:

- **raw distribution** ``p_raw``: ``softmax(logits after the modifiers)`` at temperature 1, before
  any filter. ``logprob`` values are ``log p_raw`` (natural log). The modifiers (logit bias,
  repetition/presence/frequency penalties, DRY) are part of "raw" because they change what the
  model is asked to predict.
- **sampled distribution** ``p_sampled``: the distribution the token was actually drawn from:
  ``p_raw`` through the filters and the temperature in the chain's order (`SamplingParams.samplers`),
  renormalised. Tokens a filter removed have ``sampled_prob == 0``. At temperature 0 (greedy) it
  is 1 for the argmax and 0 for every other token.
- **rank** of the chosen token: 1 + the number of tokens whose raw logprob is strictly greater
  (rank 1 = the model's favourite).
- **entropy**: ``-sum(p_raw * log p_raw)`` over the whole vocabulary, in nats.
- **candidates**: the top-N tokens by raw logprob, best first (N = ``SamplingParams.candidates``;
  0 turns them off).

The sampling chain: logit bias, then the stages in `SamplingParams.samplers` order (llama.cpp's by
default: penalties, DRY, top-nσ, top-k, typical-p, top-p, min-p, XTC, temperature), then the draw;
mirostat v2 replaces the filters and the draw (docs/sampling.md).

## Text the model reads (scoring, probes, perplexity)

`EngineAPI.score` gives every token of a text the model *reads* (user and system messages, an
edited reply, a plain text) the statistics a generated token has, teacher-forced: the token at
position i is scored from the logits after ``ids[:i]`` (so position 0, with nothing before it, is
not scored). The numbers are those of a generated token with no modifiers and nothing sampled:
``logprob`` is ``log softmax(logits)[id]``, rank and entropy as above over those logits, the
candidates the top-N of the same row; ``sampled_prob`` is None (nothing was drawn there).
`EngineAPI.probe` gives, at one position, the probability of any phrase (the product of its
tokens' teacher-forced probabilities) and its first token's rank, however far outside the top-N.

**Perplexity** of a run of scored tokens is ``exp(-mean logprob)`` over them: per message over the
scored tokens inside that message's span (`MessageScore`), for the chat over every message's
scored tokens (template tokens between messages excluded), for a plain text over every token after
the first. `Abilities.scoring` / `Abilities.probes` say whether an engine can (a server that sends
no prompt logprobs cannot: its `Abilities.why` says so).

## What a remote engine cannot know (None)

`engine.remote.RemoteEngine` reads these numbers from a server (mlx_lm.server, vLLM, llama.cpp),
which sends the chosen token's logprob and its top-N, nothing more. So these fields may be None,
meaning "unknown", never a made-up value (``--json`` writes null, the candidates panel "—"):

- `TokenEvent.sampled_prob` and `Candidate.sampled_prob`: the sampled distribution;
- `TokenEvent.entropy`: it needs the whole vocabulary;
- `TokenEvent.rank`: known only when the chosen token is among the top-N.

The local engine and the scripted one always fill them. A server that names tokens by text only
gives ids of -1 (`engine.remote.events.UNKNOWN_ID`); `TurnFinished.prompt_ids` is empty when the
server rendered the prompt itself (its chat endpoint).
"""

from __future__ import annotations

import asyncio
from typing import AsyncGenerator, Protocol, Sequence, runtime_checkable

from engine.core.contract.errors import NO_MODEL, ContextLimitError, EngineError, ModelLoadError
from engine.core.contract.models import Abilities, LoadProgress, ModelInfo
from engine.core.contract.params import PARAM_LIMITS, ParamError, SamplingParams, TurnControl
from engine.core.contract.scope import (
    MAX_SCORE_CANDIDATES,
    MessageScore,
    Preview,
    PreviewEvent,
    PreviewFinished,
    PreviewRequest,
    PreviewToken,
    ProbeRequest,
    ProbeResult,
    Scored,
    ScoreRequest,
    StageRequest,
    StageView,
    check_probe_request,
    check_score_request,
    perplexity,
)
from engine.core.contract.turns import (
    Candidate,
    EngineEvent,
    FinishReason,
    GenerateRequest,
    Message,
    Role,
    TokenEvent,
    TurnFinished,
    check_token_ids,
)

__all__ = [
    "Abilities", "Candidate", "ContextLimitError", "EngineAPI", "EngineError", "EngineEvent", "FinishReason",
    "GenerateRequest", "LoadProgress", "MAX_SCORE_CANDIDATES", "Message", "MessageScore", "ModelInfo",
    "ModelLoadError", "NO_MODEL", "PARAM_LIMITS", "ParamError", "Preview", "PreviewEvent", "PreviewFinished",
    "PreviewRequest", "PreviewToken", "ProbeRequest", "ProbeResult", "ProgressCallback", "Role", "SamplingParams",
    "ScoreRequest", "Scored", "StageRequest", "StageView", "TurnControl", "TokenEvent", "TurnFinished",
    "check_probe_request", "check_score_request", "check_token_ids", "perplexity",
]


@runtime_checkable
class EngineAPI(Protocol):
    """What the TUI and the CLI need from an engine. `engine.local.client.Engine` is the real one;
    `engine.remote.RemoteEngine` the same over an OpenAI-compatible server (some numbers None:
    see the module docstring); `engine.scripted.ScriptedEngine` is the test double that ships beside it."""

    @property
    def model(self) -> ModelInfo | None:
        """The loaded model, or None."""
        ...

    async def load(
        self, model: str, *, trust_remote_code: bool = False, on_progress: "ProgressCallback | None" = None
    ) -> ModelInfo:
        """Load a model by local path or hub id (replacing any loaded one). Raises ModelLoadError."""
        ...

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Run one turn: yields TokenEvents then exactly one TurnFinished. Raises EngineError.

        Closing the generator (`aclose`, or leaving an `async for` early) cancels the turn."""
        ...

    def preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        """What-if previews (see `PreviewRequest`): PreviewTokens as rows grow, then exactly one
        PreviewFinished. Never changes the cache a turn reuses; gives way to any other command
        within one decode step (its unfinished rows then end "cancelled"). Raises EngineError
        (one line: a bad request, or an engine that cannot preview). Leaving the iteration early
        stops it."""
        ...

    async def score(self, request: ScoreRequest) -> Scored:
        """Teacher-forced statistics of every token `request` reads, with the perplexities (see
        the module docstring). Shares the turn's cache: a history the cache holds is not read
        again, and what is read stays cached for the next turn. Raises EngineError (one line: a
        bad request, a text too long for the context, an engine that cannot score)."""
        ...

    async def probe(self, request: ProbeRequest) -> tuple[ProbeResult, ...]:
        """Each phrase's probability at `request.position` (see `ProbeRequest`), in order.
        Raises EngineError (one line: a bad request or position, an engine that cannot probe)."""
        ...

    async def token_ids(self, text: str) -> tuple[int, ...]:
        """`text` as the loaded model's tokenizer splits it, without special tokens (what a bias by
        text resolves to: one id, or several for a phrase). Raises EngineError (no model, an engine
        with no tokenizer here)."""
        ...

    async def stages(self, request: StageRequest) -> StageView:
        """The stage view of the last of `request.tokens` (see `StageRequest`), queued after any
        running turn. Raises EngineError (one line: a bad request, an engine that has no full
        logits rows to recompute from)."""
        ...

    def prepare(self, messages: Sequence[Message], draft: str = "", thinking: bool | None = None,
                score_candidates: int | None = None) -> asyncio.Future[int]:
        """Start computing, in the background, the cache the turn after `messages` will reuse (the
        conversation so far, and `draft`, the start of the user message being typed; `thinking`
        that turn's `GenerateRequest.thinking`, `score_candidates` its `score_candidates`: a
        scoring turn reads again what was cached without its rows' statistics, so they are kept
        here too). Returns at once; a turn or load submitted meanwhile waits at most a short
        chunk. The future, which never fails and may be ignored, gives how many of those ids the
        cache then holds."""
        ...

    async def count_tokens(self, messages: Sequence[Message], thinking: bool | None = None) -> int:
        """How many tokens the prompt for answering `messages` (ending with a user message) takes,
        rendered exactly as the next turn would be (with its `thinking` switch): so a message too
        long for the context is refused before it enters the chat. Raises EngineError (no model,
        a template that fails)."""
        ...

    def set_params(self, params: SamplingParams) -> None:
        """Change sampling parameters now; a running turn applies them from its next token."""
        ...

    def cancel(self) -> None:
        """Stop the running turn within one token; it then finishes with reason "cancelled"."""
        ...

    async def close(self) -> None:
        """Stop and join the engine thread, freeing the model. Idempotent."""
        ...


class ProgressCallback(Protocol):
    def __call__(self, progress: LoadProgress) -> None: ...
