"""Synthetic chats for the library benches: format-2 documents of random words, with token
lists whose ids have a long tail and whose numbers are float32, like a model's."""

from __future__ import annotations

import math
import random
from array import array
from typing import Any

WORDS = ["penguin", "volcano", "river", "token", "model", "sample", "branch", "cache", "ocean", "forest", "music", "engine", "planet", "garden", "window", "letter", "number", "story", "castle", "dragon"]


def _f32(x: float) -> float:
    return array("f", [x])[0]


def _tokens(rng: random.Random, n: int, k: int = 10) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        lps = sorted((_f32(-rng.expovariate(0.7)) for _ in range(k)), reverse=True)
        ids = [int(rng.paretovariate(0.8)) % 32000 for _ in range(k)]
        cands = [{"id": d, "text": f"w{d}", "logprob": lp, "sampled_prob": _f32(math.exp(lp)) if j < 4 else 0.0}
                 for j, (d, lp) in enumerate(zip(ids, lps))]
        out.append({"index": i, "id": ids[0], "text": f"w{ids[0]}", "piece": f"w{ids[0]}", "logprob": lps[0],
                    "sampled_prob": cands[0]["sampled_prob"], "rank": 1, "entropy": _f32(1.0 + i % 5),
                    "candidates": cands})
    return out


def chat_document(rng: random.Random, turns: int, reply_tokens: int) -> dict[str, Any]:
    """A linear format-2 chat: `turns` questions, each answered with `reply_tokens` tokens."""
    nodes: list[dict[str, Any]] = []
    for turn in range(turns):
        for role in ("user", "assistant"):
            text = " ".join(rng.choice(WORDS) for _ in range(12))
            tokens = _tokens(rng, reply_tokens) if role == "assistant" else None
            parent = None if not nodes else [len(nodes) - 1, 0]
            nodes.append({"parent": parent, "role": role, "active": 0, "versions": [{
                "text": text, "tokens": tokens, "params": {"temperature": 0.7, "seed": turn} if tokens else None,
                "finish_reason": "stop" if tokens else None, "branched_at": None, "stats": None,
                "model": "/bench/model" if tokens else None}]})
    return {"format": 2, "system_prompt": "", "nodes": nodes}
