"""Which server is on the other end, and so what it can give: asked once, when a model "loads".

Each server fills the OpenAI-compatible API differently (see docs/remote.md); the
answers here decide how a turn is asked for, instead of guessing per request:

| server | found by | streams logprobs | top-N limit | context limit from |
|---|---|---|---|---|
| vLLM | ``owned_by: "vllm"`` in /v1/models | yes | 20 (``--max-logprobs``) | ``max_model_len`` |
| llama.cpp | ``owned_by: "llamacpp"`` or /props | yes | 100 (``n_probs``) | /props ``n_ctx`` |
| mlx_lm.server | /health answers ``{"status": ...}`` | no: asked without streaming | 11 | unknown |
| other | /v1/models only | yes | 20 (OpenAI's) | unknown |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.api import ModelLoadError
from engine.remote.http import HttpClient
from engine.remote.wire import count


@dataclass(frozen=True)
class Capabilities:
    """What one server gives."""

    kind: str  # "vLLM", "llama.cpp", "mlx_lm.server" or "OpenAI-compatible"
    models: tuple[str, ...]  # what /v1/models lists
    stream_logprobs: bool  # False: a turn is one non-streamed request (mlx_lm.server)
    top_limit: int  # the most top_logprobs the server accepts
    context_limit: int  # 0 = the server does not say
    token_id_prompts: bool  # /v1/completions takes ``prompt: [ids]`` (vLLM, llama.cpp)


async def detect(client: HttpClient) -> Capabilities:
    """Ask the server what it is. Raises ModelLoadError when nothing OpenAI-compatible answers."""
    listing = await client.get_json("/v1/models")
    raw = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in raw or () if isinstance(e, dict) and isinstance(e.get("id"), str)]
    models = tuple(e["id"] for e in entries)
    owners = {e.get("owned_by") for e in entries}
    if "vllm" in owners:
        limit = max((count(e.get("max_model_len")) or 0 for e in entries), default=0)
        return Capabilities("vLLM", models, True, 20, limit, True)
    props = await client.get_json("/props")
    if "llamacpp" in owners or (isinstance(props, dict) and "default_generation_settings" in props):
        return Capabilities("llama.cpp", models, True, 100, _llama_context(props), True)
    health = await client.get_json("/health")
    if isinstance(health, dict) and "status" in health:  # mlx_lm.server (its /v1/models may be empty)
        return Capabilities("mlx_lm.server", models, False, 11, 0, False)
    if not isinstance(raw, list):
        raise ModelLoadError(f"No OpenAI-compatible API at {client.base_url} (GET /v1/models gave no model list).")
    return Capabilities("OpenAI-compatible", models, True, 20, 0, False)


def _llama_context(props: Any) -> int:
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return count(n_ctx) or 0
