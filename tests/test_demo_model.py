"""The shipped demo model: loads like any mlx-lm model, answers its little world, and stops.

Everything runs through ``mlx_lm.load``, the tokenizer's own chat template and plain greedy
decoding, exactly the path the app uses for a real model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from engine.models.demo.corpus import CAPITALS, make_corpus
from engine.models.demo.tokenizer import IM_END, encode_with_mask, render

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "engine" / "models" / "demo_model"
MAX_REPLY_TOKENS = 48


@pytest.fixture(scope="module")
def demo() -> tuple[Any, Any]:
    from mlx_lm import load

    loaded: Any = load(str(DEMO))
    return loaded[0], loaded[1]


def greedy(demo: tuple[Any, Any], messages: list[dict[str, str]]) -> tuple[list[int], list[Any]]:
    """Greedy reply tokens and, per token, the full next-token log-probabilities (mx arrays)."""
    import mlx.core as mx

    model, tokenizer = demo
    ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True))
    reply: list[int] = []
    dists: list[Any] = []
    for _ in range(MAX_REPLY_TOKENS):
        logits = model(mx.array([ids + reply]))[0, -1].astype(mx.float32)
        logprobs = logits - mx.logsumexp(logits)
        dists.append(logprobs)
        reply.append(cast(int, mx.argmax(logprobs).item()))
        if reply[-1] in tokenizer.eos_token_ids:
            break
    return reply, dists


def ask(demo: tuple[Any, Any], *turns: str) -> str:
    """Play the user turns in order (greedy replies in between); return the last reply's text."""
    messages: list[dict[str, str]] = []
    text = ""
    for turn in turns:
        messages.append({"role": "user", "content": turn})
        reply, _ = greedy(demo, messages)
        assert reply[-1] in demo[1].eos_token_ids, f"no {IM_END} within {MAX_REPLY_TOKENS} tokens"
        text = demo[1].decode(reply[:-1])
        messages.append({"role": "assistant", "content": text})
    return text


def test_folder_is_a_normal_small_mlx_lm_model(demo: tuple[Any, Any]) -> None:
    config = json.loads((DEMO / "config.json").read_text())
    _, tokenizer = demo
    assert config["model_type"] == "llama"
    assert config["max_position_embeddings"] >= 512
    assert config["eos_token_id"] == tokenizer.convert_tokens_to_ids(IM_END)
    assert tokenizer.eos_token_ids == {config["eos_token_id"]}
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template
    size = sum(p.stat().st_size for p in DEMO.iterdir() if p.is_file())
    assert size <= 10 * 1024 * 1024


def test_template_rendering_matches_training_rendering(demo: tuple[Any, Any]) -> None:
    """Training masks what `render` produces; it must be what the chat template produces."""
    _, tokenizer = demo
    for chat in make_corpus(30, seed=5):
        assert tokenizer.apply_chat_template(chat, tokenize=False) == render(chat)[0]
        ids, mask = encode_with_mask(tokenizer._tokenizer, chat)
        taught = tokenizer.decode([i for i, m in zip(ids, mask) if m])
        assert taught == "".join(m["content"] + IM_END for m in chat if m["role"] == "assistant")


def test_capital_of_france_with_real_alternatives(demo: tuple[Any, Any]) -> None:
    import mlx.core as mx

    _, tokenizer = demo
    reply, dists = greedy(demo, [{"role": "user", "content": "What is the capital of France?"}])
    pieces = [tokenizer.decode([t]) for t in reply]
    assert "Paris" in "".join(pieces)
    at = next(i for i, p in enumerate(pieces) if p.strip() == "Paris")
    top = cast(list[int], mx.argsort(-dists[at])[:10].tolist())
    cities = {c.split()[0] for c in CAPITALS.values()} - {"Paris"}
    rivals = [t for t in top if tokenizer.decode([t]).strip() and
              any(c.startswith(tokenizer.decode([t]).strip()) for c in cities)]
    assert len(rivals) >= 3, [tokenizer.decode([t]) for t in top]
    assert all(cast(float, mx.exp(dists[at][t]).item()) > 1e-3 for t in rivals[:3])


@pytest.mark.parametrize(("first", "then", "expected"), [
    ("What is the capital of France?", "And Italy?", "Rome"),
    ("What's the capital of Japan?", "What about Germany?", "Berlin"),
    ("What is 3 + 4?", "And 5 + 6?", "11"),
])
def test_follow_up_uses_previous_turn(demo: tuple[Any, Any], first: str, then: str, expected: str) -> None:
    assert expected in ask(demo, first, then)


@pytest.mark.parametrize(("a", "b"), [(3, 4), (7, 5), (9, 8), (12, 6), (2, 0)])
def test_small_sums(demo: tuple[Any, Any], a: int, b: int) -> None:
    assert ask(demo, f"What is {a} + {b}?").rstrip(".").endswith(f"= {a + b}")


@pytest.mark.parametrize(("question", "expected"), [
    ("Hello!", "help"),
    ("What can you do?", "capitals"),
    ("What colour is the sky?", "blue"),
    ("What sound does a cow make?", "moo"),
    ("Write a poem.", "demo"),
])
def test_small_talk_and_facts(demo: tuple[Any, Any], question: str, expected: str) -> None:
    assert expected in ask(demo, question)


@pytest.mark.slow
def test_training_code_builds_a_loadable_reproducible_miniature(tmp_path: Path) -> None:
    """A few training steps on a small corpus, twice: the recipe runs end to end, saves a
    model mlx-lm loads, and the same seed gives the same bytes."""
    builds = [tmp_path / "a", tmp_path / "b"]
    for out in builds:
        args = [sys.executable, "-m", "engine.models.demo", "--out", str(out), "--steps", "4", "--conversations",
                "150", "--hidden-size", "64", "--intermediate-size", "128", "--layers", "2"]
        done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stderr
        assert "final loss" in done.stdout
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (builds[0] / name).read_bytes() == (builds[1] / name).read_bytes(), name
    from mlx_lm import load

    model, tokenizer = cast(Any, load(str(builds[0])))
    assert model.args.hidden_size == 64
    assert tokenizer.eos_token_ids == {tokenizer.convert_tokens_to_ids(IM_END)}


def test_corpus_is_reproducible_and_covers_its_world() -> None:
    chats = make_corpus(600, seed=1)
    assert chats == make_corpus(600, seed=1)
    assert chats != make_corpus(600, seed=2)
    replies = [m["content"] for chat in chats for m in chat if m["role"] == "assistant"]
    named = {country for country in CAPITALS for r in replies if f"capital of {country} is" in r}
    assert len(named) >= 40
    follow_ups = [c for c in chats if any(m["content"].lower().startswith("and ") for m in c)]
    assert follow_ups and all(c[0]["role"] in ("system", "user") for c in chats)
