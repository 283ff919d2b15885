"""The report sections that drive the real Engine (see `engine.bench.turns` for the harness)."""

from __future__ import annotations

import random
import time

from engine.core.api import GenerateRequest, Message
from engine.bench.report import Section
from engine.bench.turns import Contenders, engine_turn, history, params, plain_decode_tps, words

# Targets from the performance issue: the engine may cost at most 3% (30M) / 10% (2M) of plain
# mlx-lm's decode speed; bigger models hide the per-token overhead better.
DECODE_TARGETS = {"2m": 0.90, "30m": 0.97}


async def decode_section(section: Section, name: str, contenders: Contenders, tokens: int, rounds: int,
                         min_seconds: float = 0.0) -> None:
    """Engine (10 candidates/token, detokenized events) vs a bare `generate_step` loop, tok/s.

    At least `rounds` rounds, and more (up to 5x) until `min_seconds` have passed: a small model
    decodes 200 tokens in about a second, and a median of five one-second samples on a shared
    machine swings by +-10%.
    """
    messages = (Message("user", "Tell me a story about a cat."),)
    engine_samples: list[float] = []
    plain_samples: list[float] = []
    started = time.perf_counter()
    for round_ in range(5 * rounds):
        if round_ >= rounds and time.perf_counter() - started >= min_seconds:
            break
        order = [0, 1] if round_ % 2 == 0 else [1, 0]
        for who in order:
            if who == 0:
                timing = await engine_turn(contenders.engine, GenerateRequest(messages, params(tokens, round_)))
                engine_samples.append(timing.decode_tps)
            else:
                plain_samples.append(plain_decode_tps(contenders, messages, tokens, round_))
    section.add(f"engine decode, 10 candidates ({name})", engine_samples, "tok/s")
    section.add(f"plain mlx-lm generate_step ({name})", plain_samples, "tok/s")
    section.compare(f"engine / plain ({name})", engine_samples, plain_samples, DECODE_TARGETS.get(name.split("-")[0]))


async def ttft_section(section: Section, name: str, contenders: Contenders, history_tokens: int, rounds: int) -> None:
    """First-token latency of a follow-up turn: history cached (warm), not cached (cold), fresh chat;
    and a history warmed by `Engine.prepare` before its follow-up, which is how the app runs every
    follow-up (it prepares after each reply, a resume, a branch shown, while the user types)."""
    vocab = len(contenders.tokenizer._tokenizer)  # noqa: SLF001 - the HF tokenizer's full size
    engine = contenders.engine
    fresh, cold, warm, warm_up, after, sizes = [], [], [], [], [], []
    for round_ in range(rounds):
        rng = random.Random(1000 + round_)
        past = history(history_tokens, vocab, contenders.tokenizer, rng)
        ask = (*past, Message("user", words(30, rng)))
        fresh_turn = await engine_turn(engine, GenerateRequest((Message("user", words(30, rng)),), params(1, round_)))
        cold_turn = await engine_turn(engine, GenerateRequest(ask, params(1, round_)))
        reply = cold_turn.tokens[0]
        answered = (*ask, Message("assistant", reply.text, (reply.id,)))
        follow = (*answered, Message("user", words(30, rng)))
        warm_turn = await engine_turn(engine, GenerateRequest(follow, params(1, round_)))
        await engine_turn(engine, GenerateRequest((Message("user", words(30, rng)),), params(1, round_)))  # evict
        started = time.perf_counter()
        warmed = await engine.prepare(answered)
        warm_up.append((time.perf_counter() - started) * 1e3)
        after_turn = await engine_turn(engine, GenerateRequest(follow, params(1, round_)))
        fresh.append(fresh_turn.ttft_s * 1e3)
        cold.append(cold_turn.ttft_s * 1e3)
        warm.append(warm_turn.ttft_s * 1e3)
        after.append(after_turn.ttft_s * 1e3)
        sizes.append((fresh_turn.finished.prompt_tokens, cold_turn.finished.prefilled_tokens,
                      warm_turn.finished.reused_tokens, warm_turn.finished.prefilled_tokens,
                      warmed, after_turn.finished.reused_tokens, after_turn.finished.prefilled_tokens))
    section.add(f"TTFT fresh ~30-token prompt ({name})", fresh, "ms")
    section.add(f"TTFT follow-up, history cold ({name})", cold, "ms")
    section.add(f"TTFT follow-up, history cached ({name})", warm, "ms")
    section.add(f"prepare(): warm-up of that history, from cold ({name})", warm_up, "ms")
    section.add(f"TTFT follow-up after prepare(), as the app runs it ({name})", after, "ms")
    section.compare(f"cold / cached ({name})", cold, warm, 10.0)
    section.compare(f"cached / fresh ({name})", warm, fresh, 1.3, at_most=True)
    section.compare(f"cold / after prepare() ({name})", cold, after)
    section.compare(f"after prepare() / fresh ({name})", after, fresh)
    f, c, r, p, w, r2, p2 = sizes[-1]
    section.notes.append(f"{name}: fresh prompt {f} tokens; cold prefill {c}; cached turn reused {r}, prefilled {p}")
    section.notes.append(f"{name}: the warm-up cached {w} ids; the turn after it reused {r2}, prefilled {p2}")


async def branch_section(section: Section, name: str, contenders: Contenders, history_tokens: int,
                         reply_tokens: int, rounds: int) -> None:
    """Continue from an alternative mid-reply: with the prefix cached vs the same request cold."""
    vocab = len(contenders.tokenizer._tokenizer)  # noqa: SLF001
    warm, cold = [], []
    for round_ in range(rounds):
        rng = random.Random(2000 + round_)
        ask = (*history(history_tokens, vocab, contenders.tokenizer, rng), Message("user", words(30, rng)))
        reply = await engine_turn(contenders.engine, GenerateRequest(ask, params(reply_tokens, round_)))
        cut = len(reply.tokens) // 2
        alternative = next((c for c in reply.tokens[cut].candidates if c.id != reply.tokens[cut].id),
                           reply.tokens[cut].candidates[0])
        ids = tuple(t.id for t in reply.tokens[:cut]) + (alternative.id,)
        text = "".join(t.text for t in reply.tokens[:cut]) + alternative.text
        branch = GenerateRequest((*ask, Message("assistant", text, ids)), params(1, round_), continue_last=True)
        warm.append((await engine_turn(contenders.engine, branch)).ttft_s * 1e3)
        await engine_turn(contenders.engine, GenerateRequest((Message("user", words(30, rng)),), params(1, round_)))
        cold.append((await engine_turn(contenders.engine, branch)).ttft_s * 1e3)
    section.add(f"branch -> first new token, prefix cached ({name})", warm, "ms")
    section.add(f"same branch re-run cold ({name})", cold, "ms")
    section.compare(f"cold / cached branch ({name})", cold, warm)
