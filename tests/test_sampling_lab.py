"""The new samplers in real turns: a ban holds, each stage changes what is drawn exactly as its
numpy stage says, the order matters, and every setting is saved with the reply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from engine_helpers import GREEDY, cold_logits, run

from engine.core.api import Message, SamplingParams
from engine.core.chat.conversation import Conversation, Node, Version
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict
from engine.core.params import LLAMA_CPP_ORDER, LOGITSCOPE_ORDER, MLX_LM_ORDER
from engine.local import stages
from engine.local.chain import ExtendedChain, needs_extended, packed_row

CHAT = (Message("user", "hello there, how are you today?"),)


async def test_a_banned_token_is_never_written(chatml_model: Path, engine: Any) -> None:
    await engine.load(str(chatml_model))
    events, _ = await run(engine, CHAT, GREEDY)
    favourite = events[0].id
    banned = GREEDY.with_changes(logit_bias=((favourite, -100.0),))
    events, _ = await run(engine, CHAT, banned)
    assert favourite not in [e.id for e in events]
    assert all(c.id != favourite or c.sampled_prob == 0.0 for e in events for c in e.candidates)


async def test_the_engine_s_numbers_are_the_chain_s(chatml_model: Path, engine: Any) -> None:
    """Every token of a turn with every new stage on equals the extended chain run afresh on the
    model's own logits for that position (same seed, same uniform numbers)."""
    await engine.load(str(chatml_model))
    params = SamplingParams(temperature=1.1, top_k=40, top_p=0.95, dry_multiplier=0.8, dry_allowed_length=1,
                            top_n_sigma=2.5, typical_p=0.95, xtc_probability=0.5, xtc_threshold=0.05,
                            dynatemp_range=0.4, logit_bias=((3, 1.5),), seed=21, max_tokens=8, candidates=4)
    events, done = await run(engine, CHAT, params)
    import random

    from engine.local.sampling import next_uniform
    chain = ExtendedChain(params, 0, params.seed or 0)
    uniforms = random.Random(params.seed)
    ids = list(done.prompt_ids)
    for event in events:
        logits = cold_logits(chatml_model, ids)
        chain.vocab_size = logits.shape[0]
        draw = chain.choose(logits, np.array(ids), next_uniform(uniforms))
        row = packed_row(draw, params.candidates)
        assert draw.token == event.id
        assert abs(row[2] - event.sampled_prob) < 1e-4
        ids.append(event.id)


def test_the_classic_chain_stays_on_the_fast_path() -> None:
    """With every new sampler off, neither engine leaves its tuned graph (the speed of today)."""
    assert not needs_extended(SamplingParams())
    assert not needs_extended(SamplingParams(top_k=40, top_p=0.9, min_p=0.05, repetition_penalty=1.1))
    assert not needs_extended(SamplingParams(top_p=0.9, samplers=MLX_LM_ORDER))  # top-k off: order irrelevant
    assert needs_extended(SamplingParams(top_k=40, top_p=0.9, samplers=MLX_LM_ORDER))  # top-p before top-k
    for on in (dict(logit_bias=((1, 2.0),)), dict(dry_multiplier=0.5), dict(top_n_sigma=1.0), dict(typical_p=0.9),
               dict(xtc_probability=0.5), dict(dynatemp_range=0.5), dict(mirostat=2)):
        assert needs_extended(SamplingParams(**on)), on
    assert not needs_extended(SamplingParams(xtc_probability=0.5, xtc_threshold=0.6))  # llama.cpp: off above 0.5


def test_the_order_changes_what_top_p_keeps() -> None:
    """llama.cpp's order filters at temperature 1, logitscope's at the temperature: at a high
    temperature the same top-p keeps more tokens in logitscope's order."""
    x = (np.random.default_rng(3).standard_normal(400) * 3).astype(np.float32)
    kept = {}
    for name, order in (("llama.cpp", LLAMA_CPP_ORDER), ("logitscope", LOGITSCOPE_ORDER)):
        params = SamplingParams(temperature=2.0, top_p=0.8, top_n_sigma=10.0, samplers=order)  # extended chain
        draw = ExtendedChain(params, 400, 1).choose(x, None, 0.5)
        assert draw.weights is not None
        kept[name] = int(np.count_nonzero(draw.weights))
    scaled = stages.top_p(stages.temperature(x, 2.0, 0.0, 1.0), 0.8)
    assert kept["logitscope"] == np.count_nonzero(np.isfinite(scaled)) > kept["llama.cpp"]


def test_mirostat_keeps_its_mu_between_tokens_and_restarts_when_tau_changes() -> None:
    params = SamplingParams(temperature=1.0, mirostat=2, mirostat_tau=2.0, mirostat_eta=0.5)
    chain = ExtendedChain(params, 300, 5)
    x = (np.random.default_rng(1).standard_normal(300) * 2).astype(np.float32)
    chain.choose(x, None, 0.3)
    moved = chain.mu
    assert moved != 4.0
    chain.set_params(params.with_changes(temperature=0.9))
    assert chain.mu == moved
    chain.set_params(params.with_changes(mirostat_tau=3.0))
    assert chain.mu == 6.0


def _chat(params: SamplingParams) -> Conversation:
    conversation = Conversation()
    conversation.append(Node("user", [Version("hi")]))
    conversation.append(Node("assistant", [Version("ok", [], params=params, finish_reason="stop")]))
    return conversation


def test_every_setting_is_saved_with_the_reply() -> None:
    params = SamplingParams(logit_bias=((5, -100.0), (9, 2.5)), dry_multiplier=0.8, dry_sequence_breakers=("\n", "##"),
                            top_n_sigma=1.5, typical_p=0.9, xtc_probability=0.3, dynatemp_range=0.5, mirostat=2,
                            samplers=MLX_LM_ORDER)
    conversation = _chat(params)
    data = conversation_to_dict(conversation)
    import json

    back = conversation_from_dict(json.loads(json.dumps(data)))
    assert back.root is not None and back.root.versions[0].child is not None
    assert back.root.versions[0].child.versions[0].params == params


@pytest.mark.parametrize("bad", [{"samplers": ["top_k"]}, {"logit_bias": [[1, 500]]}, {"mirostat": 1},
                                 {"dry_sequence_breakers": [""]}, {"samplers": "temperature;penalties"}])
def test_a_saved_file_with_bad_sampler_settings_is_one_line(bad: dict[str, Any]) -> None:
    data = conversation_to_dict(_chat(SamplingParams()))
    data["nodes"][1]["versions"][0]["params"].update(bad)
    with pytest.raises(ValueError) as error:
        conversation_from_dict(data)
    assert "\n" not in str(error.value) and "params" in str(error.value)


async def test_the_stage_view_replays_the_turn_exactly(chatml_model: Path, engine: Any) -> None:
    """The stage view's numbers are recomputed from the stored ids and parameters: the replay
    draws the turn's very tokens, its final row is each candidate's sampled probability, and every
    candidate that ends at 0 is marked removed by exactly one stage."""
    from engine.local.stageview import replay, stage_rows

    await engine.load(str(chatml_model))
    params = SamplingParams(temperature=1.3, top_k=30, top_p=0.9, min_p=0.02, xtc_probability=0.7,
                            xtc_threshold=0.05, top_n_sigma=2.0, logit_bias=((4, 2.0),), repetition_penalty=1.3,
                            seed=8, max_tokens=6, candidates=8)
    events, done = await run(engine, CHAT, params)
    history = list(done.prompt_ids)
    tokens = [e.id for e in events]
    rows = [cold_logits(chatml_model, history + tokens[:i]) for i in range(len(tokens))]
    draws = replay(rows, params, 8, history, tokens)
    removed_somewhere = 0
    for row, draw, event in zip(rows, draws, events):
        ids = [c.id for c in event.candidates]
        table = stage_rows(row, draw, ids)
        assert table[0].stage == "model" and table[-1].stage == "final"
        assert [s.stage for s in table[1:-1]][:2] == ["logit bias", "penalties"]
        np.testing.assert_allclose(table[-1].probs, [c.sampled_prob for c in event.candidates], atol=1e-5)
        for k, candidate in enumerate(event.candidates):
            marks = sum(stage.removed[k] for stage in table)
            assert marks == (1 if candidate.sampled_prob == 0.0 else 0)
            removed_somewhere += marks
    assert removed_somewhere  # some candidate was removed, so the marks were exercised
    with pytest.raises(ValueError, match="the replay drew"):
        replay(rows, params.with_changes(seed=9), 9, history, tokens)  # another seed is another computation
