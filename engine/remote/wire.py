"""What goes on the wire: request bodies from our `SamplingParams`, and per-token records from the
``logprobs`` objects servers send back. Pure functions, no I/O, so every server's dialect is
tested without a server.

Three dialects of ``logprobs`` arrive:

- chat style (OpenAI, vLLM, llama.cpp, mlx_lm.server): ``{"content": [{"token", "logprob",
  "top_logprobs": [...]}]}``; llama.cpp and mlx_lm.server add ``"id"``; vLLM gives ids as
  ``"token_id:123"`` when asked with ``return_tokens_as_token_ids``;
- legacy completions (vLLM ``/v1/completions``): ``{"tokens", "token_logprobs", "top_logprobs":
  [{token: logprob}]}``;
- none at all (mlx_lm.server while streaming): then the caller must ask without streaming.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.api import EngineError, Message, SamplingParams
from engine.core.params import wire_optional


@dataclass(frozen=True)
class Alternative:
    """One of the server's top-N for a position."""

    id: int | None  # None when the server names tokens only by text
    token: str
    logprob: float


@dataclass(frozen=True)
class TokenRecord:
    """One generated token as the server reported it."""

    id: int | None
    token: str
    logprob: float
    top: tuple[Alternative, ...]  # best first (sorted here: mlx_lm.server sends them unordered)


def sampling_fields(params: SamplingParams, top_n: int, kind: str = "") -> dict[str, Any]:
    """The sampling part of a request for a server of `kind` (`Capabilities.kind`). Only what
    differs from "off" is sent, so a server that lacks a knob (min_p, repetition_penalty are
    extensions) is not handed one it may refuse; then each server's own names (`_dialect`)."""
    body: dict[str, Any] = {"temperature": params.temperature, "max_tokens": params.max_tokens,
                            "logprobs": True}
    if top_n > 0:
        body["top_logprobs"] = top_n
    for name, (wire, off) in wire_optional().items():
        value = getattr(params, name)
        if value != off:
            body[wire] = value
    refuse_unknown(params, kind)
    if params.logit_bias:  # OpenAI's shape, which every server here reads: {"id": bias}; -100 bans
        body["logit_bias"] = {str(token): bias for token, bias in params.logit_bias}
    body.update(_dialect(kind, params))
    return body


# The samplers beyond the classic ones that each server takes, under its own names (llama.cpp's
# server: tools/server/README.md; mlx_lm.server: its XTC fields). The others are refused in one
# line rather than dropped: a reply drawn without a sampler the user switched on would be a lie.
_EXTENDED = ("dry", "top_n_sigma", "typical_p", "xtc", "dynatemp", "mirostat")
_SERVER_KNOWS: dict[str, tuple[str, ...]] = {
    "llama.cpp": _EXTENDED,
    "mlx_lm.server": ("xtc",),
}
_LABELS = {"dry": "DRY", "top_n_sigma": "top-nσ", "typical_p": "typical-p", "xtc": "XTC",
           "dynatemp": "dynamic temperature", "mirostat": "mirostat"}


def extended_on(params: SamplingParams) -> list[str]:
    """The samplers beyond the classic ones that are on (`_EXTENDED` names)."""
    on = {"dry": params.dry_multiplier != 0.0 and params.dry_penalty_last_n != 0, "top_n_sigma": params.top_n_sigma > 0,
          "typical_p": params.typical_p < 1.0, "xtc": params.xtc_probability > 0 and params.xtc_threshold <= 0.5,
          "dynatemp": params.dynatemp_range > 0, "mirostat": params.mirostat == 2}
    return [name for name in _EXTENDED if on[name]]


def refuse_unknown(params: SamplingParams, kind: str) -> None:
    """One line naming the samplers switched on that this server does not take (EngineError)."""
    unknown = [name for name in extended_on(params) if name not in _SERVER_KNOWS.get(kind, ())]
    if unknown:
        server = kind or "This server"
        takes = ", ".join(_LABELS[n] for n in _SERVER_KNOWS.get(kind, ())) or "none of them"
        raise EngineError(f"{server} does not take {', '.join(_LABELS[n] for n in unknown)} (of the samplers beyond "
                          f"top-k/top-p/min-p it takes {takes}): switch {'it' if len(unknown) == 1 else 'them'} off "
                          "or use llama.cpp's server.")


def _dialect(kind: str, params: SamplingParams) -> dict[str, Any]:
    """What a server names its own way. llama.cpp's defaults are not "off" (top_k 40, top_p
    0.95, min_p 0.05), so every filter is sent, and its penalty is ``repeat_penalty`` over
    ``repeat_last_n``; mlx_lm.server looks back 20 tokens unless told our window."""
    window = params.repetition_context_size
    if kind == "llama.cpp":
        p = params
        return {"top_k": p.top_k, "top_p": p.top_p, "min_p": p.min_p,
                "repeat_penalty": p.repetition_penalty, "repeat_last_n": window,
                # llama.cpp's own names and meanings (its server's /completion and chat fields)
                "samplers": list(p.samplers), "dry_multiplier": p.dry_multiplier, "dry_base": p.dry_base,
                "dry_allowed_length": p.dry_allowed_length, "dry_penalty_last_n": p.dry_penalty_last_n,
                "dry_sequence_breakers": list(p.dry_sequence_breakers), "top_n_sigma": p.top_n_sigma or -1.0,
                "typical_p": p.typical_p, "xtc_probability": p.xtc_probability, "xtc_threshold": p.xtc_threshold,
                "dynatemp_range": p.dynatemp_range, "dynatemp_exponent": p.dynatemp_exponent,
                "mirostat": p.mirostat, "mirostat_tau": p.mirostat_tau, "mirostat_eta": p.mirostat_eta}
    if kind == "mlx_lm.server":
        on = {"repetition_context_size": params.repetition_penalty != 1.0,
              "presence_context_size": params.presence_penalty != 0.0,
              "frequency_context_size": params.frequency_penalty != 0.0}
        out: dict[str, Any] = {name: window for name, used in on.items() if used}
        if "xtc" in extended_on(params):
            out.update(xtc_probability=params.xtc_probability, xtc_threshold=params.xtc_threshold)
        return out
    return {}


def chat_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """The conversation as the chat endpoint takes it (text only: ids cannot travel this way)."""
    return [{"role": m.role, "content": m.text} for m in messages]


def records(choice: dict[str, Any]) -> list[TokenRecord]:
    """The token records of one choice (a stream chunk's or a whole response's); [] when the
    choice carries no ``logprobs``. Raises EngineError for a malformed object."""
    logprobs = choice.get("logprobs")
    if logprobs is None:
        return []
    if not isinstance(logprobs, dict):
        raise EngineError("The server sent malformed logprobs (not an object).")
    if isinstance(logprobs.get("content"), list):
        return [_chat_record(entry) for entry in logprobs["content"] if entry]
    if isinstance(logprobs.get("tokens"), list):
        return _legacy_records(logprobs)
    if logprobs.get("content") is None and not logprobs.get("tokens"):
        return []
    raise EngineError("The server sent malformed logprobs (no content list).")


def _chat_record(entry: Any) -> TokenRecord:
    if not isinstance(entry, dict):
        raise EngineError("The server sent a malformed logprobs entry (not an object).")
    top = entry.get("top_logprobs") or []
    if not isinstance(top, list):
        raise EngineError("The server sent malformed top_logprobs (not a list).")
    alternatives = tuple(sorted((_alternative(a) for a in top), key=lambda a: -a.logprob))
    token = _text(entry)
    return TokenRecord(_token_id(entry, token), _plain(token), _logprob(entry.get("logprob")), alternatives)


def _alternative(entry: Any) -> Alternative:
    if not isinstance(entry, dict):
        raise EngineError("The server sent a malformed top_logprobs entry (not an object).")
    token = _text(entry)
    return Alternative(_token_id(entry, token), _plain(token), _logprob(entry.get("logprob")))


def _legacy_records(logprobs: dict[str, Any]) -> list[TokenRecord]:
    tokens, values = logprobs.get("tokens") or [], logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    if not (len(tokens) == len(values) == len(tops)):
        raise EngineError("The server sent malformed logprobs (lists of different lengths).")
    out = []
    for token, value, top in zip(tokens, values, tops):
        if not isinstance(token, str) or (top is not None and not isinstance(top, dict)):
            raise EngineError("The server sent malformed logprobs (a token that is not text).")
        alternatives = sorted((Alternative(_token_id({}, t), _plain(t), _logprob(lp)) for t, lp in (top or {}).items()),
                              key=lambda a: -a.logprob)
        out.append(TokenRecord(_token_id({}, token), _plain(token), _logprob(value), tuple(alternatives)))
    return out


def _text(entry: dict[str, Any]) -> str:
    """The token's text: its UTF-8 ``bytes`` when given (exact, even for part of a character),
    else ``token``."""
    raw = entry.get("bytes")
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return bytes(raw).decode("utf-8", "replace")
    token = entry.get("token", "")
    if not isinstance(token, str):
        raise EngineError("The server sent a token that is not text.")
    return token


def _token_id(entry: dict[str, Any], token: str) -> int | None:
    """The id from ``"id"`` (llama.cpp, mlx_lm.server) or a ``token_id:N`` token (vLLM)."""
    value = count(entry.get("id"))
    if value is not None:
        return value
    if token.startswith("token_id:") and token[9:].isdigit() and len(token) < 30:
        return count(int(token[9:]))
    return None


def _plain(token: str) -> str:
    """``token_id:N`` names an id, not text: the text then comes from the content delta."""
    return "" if token.startswith("token_id:") and token[9:].isdigit() else token


def _logprob(value: Any) -> float:
    """A logprob as a float; -inf (JSON has none: some servers send -9999 or null) stays -inf."""
    if value is None:
        return -math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value > 1e-6:
        raise EngineError(f"The server sent an impossible logprob: {str(value)[:24]}")
    return float(value)


def greedy_choice(record: TokenRecord) -> TokenRecord:
    """At temperature 0 the chosen token is the best of the top-N, whatever the server labelled."""
    if not record.top:
        return record
    best = record.top[0]
    return TokenRecord(best.id, best.token, best.logprob, record.top)


def finish_reason(choice: dict[str, Any]) -> str | None:
    """OpenAI's reasons mapped onto ours ("tool_calls", "content_filter" end a reply like "stop")."""
    reason = choice.get("finish_reason")
    if reason is None:
        return None
    return "length" if reason == "length" else "stop"


MOST_TOKENS = 2**31 - 1  # more than any context or vocabulary; what the library's int columns hold


def count(value: Any, most: int = MOST_TOKENS) -> int | None:
    """A number of tokens (or a token id) a server reported, or None when it is not one: JSON
    booleans are ints to Python, and negative, fractional or absurd counts reached the stats,
    `--json` and the library as they came."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        return None
    return value


def usage_counts(obj: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt_tokens, cached_tokens) from a ``usage`` object (OpenAI's
    ``prompt_tokens_details.cached_tokens``) or llama.cpp's ``timings`` (``cache_n`` reused,
    ``prompt_n`` computed), when the server sent one; None when it sent none or impossible
    counts (an impossible cached count is taken as nothing cached)."""
    usage = obj.get("usage")
    timings = obj.get("timings")
    if isinstance(timings, dict) and ("cache_n" in timings or "prompt_n" in timings):
        reused, computed = count(timings.get("cache_n")), count(timings.get("prompt_n"))
        if reused is None or computed is None or count(reused + computed) is None:
            return None
        return reused + computed, reused
    if not isinstance(usage, dict):
        return None
    prompt = count(usage.get("prompt_tokens"))
    if prompt is None:
        return None
    details = usage.get("prompt_tokens_details") or {}
    cached = count(details.get("cached_tokens") if isinstance(details, dict) else None) or 0
    return prompt, min(cached, prompt)
