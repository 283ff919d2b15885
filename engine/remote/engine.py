"""`RemoteEngine`: the `EngineAPI` over an OpenAI-compatible server (mlx_lm.server, vLLM,
llama.cpp's server), so the TUI and ``logitscope run`` inspect a model they cannot hold.

No thread and no MLX here: a turn is HTTP requests read on the event loop (`engine.remote.chat`,
`engine.remote.completions`), every read raced against `cancel()` (`engine.remote.waiting`) so a
stop closes the connection at once instead of waiting for the next token.
What a server cannot tell (entropy, sampled probabilities, a rank outside its top-N) stays None.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

from engine.core.api import (
    NO_MODEL,
    Abilities,
    EngineError,
    EngineEvent,
    GenerateRequest,
    LoadProgress,
    Message,
    ModelInfo,
    ModelLoadError,
    PreviewEvent,
    PreviewRequest,
    ProbeRequest,
    ProbeResult,
    ProgressCallback,
    SamplingParams,
    Scored,
    ScoreRequest,
    StageRequest,
    StageView,
)
from engine.remote.capabilities import Capabilities, detect
from engine.remote.chat import ChatTurn
from engine.remote.completions import IdsTurn
from engine.remote.http import HttpClient, HttpOptions
from engine.remote.tokens import ServerTokenizer, in_daemon_thread, load_tokenizer, local_tokenizer_folder
from engine.remote.waiting import Deadline

SERVER_DEFAULT = ("", "demo", "default")  # model names that mean "whatever the server serves"
PREVIEW_REFUSAL = "Previews are not available on a remote server (--server): they need the local engine."
SCORE_REFUSAL = ("Scoring the text a model reads is not available on a remote server (--server): servers send "
                 "no logprobs of the prompt here; it needs the local engine.")
STAGES_REFUSAL = ("The stage view cannot be exact on a remote server: it sends the top candidates, not the "
                  "whole logits row each stage is computed from (a local engine can).")


class RemoteEngine:
    """Turns on a server; see the module docstring and docs/remote.md."""

    def __init__(self, options: HttpOptions, tokenizer: str = "") -> None:
        """Nothing is contacted until `load` (so a wrong URL is one line there, not a crash here).
        `tokenizer`: a folder or hub id of the model's tokenizer, for token-id prompts (default:
        the model's name, when the server takes ids)."""
        self._options = options
        self._tokenizer_source = tokenizer
        self._tokens: ServerTokenizer | None = None  # the model's tokenizer here, when found
        self._by_ids = False  # token-id prompts: the server takes them and the tokenizer is here
        self._interrupt = asyncio.Event()  # cancel or new parameters: stop reading now
        self._client: HttpClient | None = None
        self._caps: Capabilities | None = None
        self._model: ModelInfo | None = None
        self._wire_model = ""
        self._params = SamplingParams()
        self._cancel = asyncio.Event()
        self._closed = False

    @property
    def model(self) -> ModelInfo | None:
        return self._model

    @property
    def capabilities(self) -> Capabilities | None:
        """What the server gives (None before `load`)."""
        return self._caps

    async def load(self, model: str, *, trust_remote_code: bool = False,
                   on_progress: ProgressCallback | None = None) -> ModelInfo:
        """Ask the server what it is and check it serves `model` (its default when `model` is
        empty or "demo"). Raises ModelLoadError; a failed load keeps the previous model."""
        if self._closed:
            raise ModelLoadError("The engine is closed.")
        if on_progress is not None:
            on_progress(LoadProgress(f"asking {self._options.base_url}", None))
        client = self._client or HttpClient(self._options)
        self._client = client
        caps = await detect(client)
        name, wire = _choose_model(model, caps, client.base_url)
        if wire not in caps.models and wire != "default_model":
            await _check_served(client, wire)
        tokens, problem = await self._tokenizer_for(caps, name)
        self._caps, self._wire_model, self._tokens = caps, wire, tokens
        self._by_ids = tokens is not None and caps.token_id_prompts
        self._model = ModelInfo(name=name, path=f"{client.base_url}#{name}", context_limit=caps.context_limit,
                                vocab_size=len(tokens) if tokens is not None else 0, has_chat_template=True,
                                parameters=0, dtype="remote", blas=caps.kind,
                                notes=_notes(caps, self._by_ids, tokens is not None, problem),
                                abilities=_abilities(caps, self._by_ids))
        return self._model

    async def _tokenizer_for(self, caps: Capabilities, name: str) -> tuple[ServerTokenizer | None, str]:
        """The local tokenizer, or why there is none. Looked for where it gives something: the
        server takes token ids (exact prompts), one was named (`--tokenizer`), or the server sends
        tokens as bare ids (mlx_lm.server at temperature > 0: their text is known only from the
        tokenizer). For the last, only what is already on this machine is used (the model's
        folder, or its id in the local Hugging Face cache): nothing is downloaded unasked."""
        source = self._tokenizer_source
        if not source and caps.token_id_prompts:
            source = name
        if not source and caps.kind == "mlx_lm.server":
            found: str | None = await in_daemon_thread(local_tokenizer_folder, name)
            source = found or ""
            if not source:
                return None, f"no tokenizer for {name!r} is on this machine"
        if not source:
            return None, ""
        try:
            return await in_daemon_thread(load_tokenizer, source), ""
        except EngineError as exc:
            return None, str(exc)

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        return self._turn(request)

    def preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        """Refused: a server decodes one sequence per request, so k previews would be k full
        turns (and its sampler cannot be seeded to match a later branch token for token)."""
        return _refused(EngineError(PREVIEW_REFUSAL))

    async def score(self, request: ScoreRequest) -> Scored:
        """Refused (`Abilities.scoring` is False): no server here sends the prompt's logprobs."""
        raise EngineError(SCORE_REFUSAL)

    async def probe(self, request: ProbeRequest) -> tuple[ProbeResult, ...]:
        """Refused (`Abilities.probes` is False), for the same reason as `score`."""
        raise EngineError(SCORE_REFUSAL)

    async def token_ids(self, text: str) -> tuple[int, ...]:
        """Through the model's tokenizer here (--tokenizer, or found in the Hugging Face cache);
        without one a text cannot be turned into the ids a server's logit_bias takes."""
        if self._model is None or self._closed:
            raise EngineError(NO_MODEL)
        if self._tokens is None:
            raise EngineError("A bias by text needs the model's tokenizer here (--tokenizer): give token ids.")
        tokens = self._tokens
        return tuple(int(i) for i in await in_daemon_thread(lambda: tokens.encode(text, add_special_tokens=False)))

    async def stages(self, request: StageRequest) -> StageView:
        """Refused: a server sends the chosen token's logprob and its top-N, never the whole
        logits row, so no stage's distribution can be recomputed exactly from here."""
        raise EngineError(STAGES_REFUSAL)

    def prepare(self, messages: Sequence[Message], draft: str = "", thinking: bool | None = None,
                score_candidates: int | None = None) -> asyncio.Future[int]:
        """Nothing to warm from here (the server's own prefix cache does that on the next turn)."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        done.set_result(0)
        return done

    async def count_tokens(self, messages: Sequence[Message], thinking: bool | None = None) -> int:
        """0: the server renders and counts the prompt itself (and refuses one too long for it),
        so the caller's context check is skipped (`context_limit` is then 0, "unknown", or the
        server's own limit). `thinking` is not sent: a server offers no switch here."""
        if self._model is None or self._closed:
            raise EngineError(NO_MODEL)
        if self._by_ids and self._tokens is not None:
            return len(await self._tokens.render(messages, False))
        return 0

    def set_params(self, params: SamplingParams) -> None:
        """In token-id mode from the next token (the stream is ended and the reply continued);
        over the chat endpoint from the next reply (it cannot continue one)."""
        self._params = params
        self._interrupt.set()

    def cancel(self) -> None:
        self._cancel.set()
        self._interrupt.set()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cancel.set()
        if self._client is not None:
            await self._client.close()

    async def _turn(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """One turn: as token ids where the server takes them (`engine.remote.completions`), else
        through the chat endpoint (`engine.remote.chat`)."""
        client, caps = self._ready(request)
        self._cancel.clear()
        self._params = request.params
        limit = self._options.turn_timeout_s
        deadline = Deadline.after(limit, f"The server at {client.base_url} did not finish the reply within {limit:g} s "
                                         "(the turn limit: [engine] turn_timeout_s, --turn-timeout); stopped it.")
        turn: IdsTurn | ChatTurn
        if self._by_ids and self._tokens is not None:
            turn = IdsTurn(client, caps, self._tokens, self._wire_model, lambda: self._params, self._cancel,
                           self._interrupt, deadline)
        else:
            turn = ChatTurn(client, caps, self._tokens, self._wire_model, self._cancel, deadline)
        async for event in turn.run(request):
            yield event

    def _ready(self, request: GenerateRequest) -> tuple[HttpClient, Capabilities]:
        """Refuse what cannot be sent, before anything is."""
        if self._closed:
            raise EngineError("The engine is closed.")
        if self._client is None or self._caps is None or self._model is None:
            raise EngineError(NO_MODEL)
        if not request.messages:
            raise EngineError("Nothing to answer: the conversation is empty.")
        if request.continue_last and not self._by_ids:
            raise EngineError(f"{self._caps.kind} at {self._client.base_url} cannot continue a partial reply "
                              "over the chat endpoint: branching from a candidate needs a local engine.")
        return self._client, self._caps

def _choose_model(model: str, caps: Capabilities, base_url: str) -> tuple[str, str]:
    """(display name, name sent on the wire). An empty name or "demo" takes the server's own;
    mlx_lm.server's own is "default_model" (its /v1/models may list nothing: see `check_served`)."""
    mlx = caps.kind == "mlx_lm.server"
    if model in SERVER_DEFAULT:
        if mlx:
            return (caps.models[-1] if caps.models else "default_model"), "default_model"
        if not caps.models:
            raise ModelLoadError(f"The server at {base_url} lists no model: name one with --model.")
        return caps.models[0], caps.models[0]
    if mlx and (not caps.models or model == caps.models[-1]):
        return model, "default_model" if caps.models else model
    if model not in caps.models:
        served = ", ".join(caps.models[:5]) + (" ..." if len(caps.models) > 5 else "")
        raise ModelLoadError(f"The server at {base_url} does not serve {model!r} (it serves: {served or 'nothing'}).")
    return model, model


async def _check_served(client: HttpClient, wire: str) -> None:
    """A one-token request, for a server that does not list what it serves (mlx_lm.server with no
    Hugging Face cache): a name it cannot serve fails here, at load, not on the first message."""
    body = {"model": wire, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    try:
        await client.post_json("/v1/chat/completions", body)
    except EngineError as exc:
        raise ModelLoadError(f"{wire!r}: {exc}") from None


def _abilities(caps: Capabilities, by_ids: bool) -> Abilities:
    """What the app may offer on this server: over the chat endpoint the server renders the
    history itself, so it counts the prompt, continues no partial reply and takes parameter
    changes only from the next reply; previews need the local engine everywhere."""
    why = [("previews", PREVIEW_REFUSAL), ("scoring", SCORE_REFUSAL), ("probes", SCORE_REFUSAL),
           ("stage_view", STAGES_REFUSAL)]
    if not by_ids:
        why += [("branching", f"{caps.kind}'s chat endpoint cannot continue a partial reply: branching from a "
                              "candidate needs a local engine or token-id prompts (--tokenizer)."),
                ("token_counting", f"{caps.kind} counts the prompt itself over the chat endpoint."),
                ("live_params", f"{caps.kind}'s chat endpoint takes new settings from the next reply.")]
    return Abilities(previews=False, stage_view=False, branching=by_ids, token_counting=by_ids, live_params=by_ids,
                     warm_up=False, scoring=False, probes=False, why=tuple(why))


def _notes(caps: Capabilities, by_ids: bool, has_tokenizer: bool, problem: str) -> tuple[str, ...]:
    """Said once after the load: what this server cannot show."""
    notes = [(f"{caps.kind}: entropy and sampled probabilities are not sent by servers (shown as —); "
              f"at most {caps.top_limit} candidates per token.")]
    if not caps.stream_logprobs:
        notes.append(f"{caps.kind} sends no logprobs while streaming: each reply arrives whole, "
                     "with candidates only at temperature 0.")
    if caps.token_id_prompts and not by_ids:
        notes.append(f"{caps.kind} takes token-id prompts, but {problem} Using the chat endpoint instead.")
    if caps.kind == "mlx_lm.server" and not has_tokenizer:
        notes.append(f"mlx_lm.server sends tokens at temperature > 0 as bare ids and no tokenizer is here "
                     f"({(problem or 'none named').rstrip('.')}): each token's text is unknown there (the reply's text is whole). To see it, start with "
                     "--tokenizer FOLDER_OR_HUB_ID, or put the model in the local Hugging Face cache.")
    if not by_ids:
        notes.append("Over the chat endpoint the history is sent as text, parameter changes apply from "
                     "the next reply, and branching needs a local engine or token-id prompts.")
    return tuple(notes)


async def _refused(error: EngineError) -> AsyncGenerator[PreviewEvent, None]:
    """A preview stream that fails at once with `error`."""
    raise error
    yield  # pragma: no cover - makes this an async generator
