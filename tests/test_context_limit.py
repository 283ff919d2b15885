"""#23: the context limit comes from every config key models use for it, and is never exceeded.

GPT-2 keeps its length as `n_positions` in a learned position table that MLX's CPU lookup does not
bounds-check: a prompt past it reads undefined memory. The limit is read in one place
(`engine.models.context`), tested here per family and against every mlx-lm model's arguments;
the engine refuses a prompt that would pass it before any forward pass and stops a reply at it.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import GREEDY, run
from mlx_lm.utils import load_tokenizer
from tinymodels import FAMILY_CONFIGS, build_family, family_config

from engine.core.api import ContextLimitError, Message
from engine.local.client import Engine
from engine.models.context import CONTEXT_KEYS, DEFAULT_CONTEXT, model_context_limit
from engine.local.prompt import render_prompt

GPT2_POSITIONS = 1024


@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_each_family_config_gives_its_own_limit(family: str) -> None:
    config = family_config(family, 400, 1)
    limit = model_context_limit(config)
    if family == "mamba2":  # its configs state none: said once, and the default used
        assert (limit.tokens, limit.stated) == (DEFAULT_CONTEXT, False)
    else:
        assert limit.stated and limit.tokens == config.get("n_positions", config.get("max_position_embeddings"))


@pytest.mark.parametrize(("config", "tokens", "source"), [
    ({"model_type": "gpt2", "n_positions": 1024, "n_ctx": 1024}, 1024, "config n_positions"),
    ({"model_type": "gpt_bigcode", "n_positions": 8192}, 8192, "config n_positions"),
    ({"model_type": "gptj", "n_positions": 2048}, 2048, "config n_positions"),
    ({"model_type": "qwen", "seq_length": 8192, "max_position_embeddings": 32768}, 8192, "config seq_length"),
    ({"model_type": "mpt", "max_seq_len": 2048}, 2048, "config max_seq_len"),
    ({"model_type": "kimi_linear", "model_max_length": 131072}, 131072, "config model_max_length"),
    ({"model_type": "x", "max_sequence_length": 3000, "max_seq_length": 5000}, 3000, "config max_sequence_length"),
    ({"model_type": "mistral3", "text_config": {"max_position_embeddings": 131072}}, 131072,
     "config text_config.max_position_embeddings"),
    ({"model_type": "mistral", "max_position_embeddings": 32768, "sliding_window": 4096}, 32768,
     "config max_position_embeddings"),  # the window bounds attention, not positions
    ({"model_type": "qwen2", "max_position_embeddings": 32768, "rope_scaling": {"type": "yarn", "factor": 4.0}},
     32768, "config max_position_embeddings"),  # a scaling factor is never multiplied in
    ({"model_type": "llama", "max_position_embeddings": 2048.0}, 2048, "config max_position_embeddings"),
])
def test_every_key_models_use_is_read(config: dict[str, Any], tokens: int, source: str) -> None:
    limit = model_context_limit(config)
    assert (limit.tokens, limit.source, limit.stated, limit.note()) == (tokens, source, True, "")


def test_unusable_values_are_ignored_and_a_missing_limit_is_said_once() -> None:
    for value in (None, True, "2048", -5, 0, 2048.5, [2048]):
        limit = model_context_limit({"model_type": "falcon", "max_position_embeddings": value})
        assert (limit.tokens, limit.stated) == (DEFAULT_CONTEXT, False)
    assert "states no context length" in limit.note() and "max_context" in limit.note()
    chosen = model_context_limit({"model_type": "falcon"}, max_context=16384)  # the user's choice replaces it
    assert (chosen.tokens, chosen.stated) == (16384, False) and "16384" in chosen.note()


def test_max_context_only_lowers_a_stated_limit() -> None:
    config = {"n_positions": 1024}
    assert model_context_limit(config, max_context=100).tokens == 100
    assert model_context_limit(config, max_context=5000).tokens == 1024


def test_a_position_table_caps_whatever_the_config_says() -> None:
    class Table:
        weight = type("W", (), {"shape": (64, 8)})()

    class Model:
        def named_modules(self) -> list[tuple[str, Any]]:
            return [("model.wpe", Table()), ("model.wte", object())]

    limit = model_context_limit({"max_position_embeddings": 4096}, Model(), max_context=10_000)
    assert (limit.tokens, limit.source) == (64, "position table")


_NOT_A_LENGTH = re.compile(r"window|original_|position_embedding_type|rope_|norm_softmax|time_step|conv")


def test_every_context_key_of_mlx_lm_model_arguments_is_read() -> None:
    """A family whose arguments name their length in a new way fails here, not at a user's prompt."""
    import mlx_lm.models

    unread: dict[str, str] = {}
    for info in pkgutil.iter_modules(mlx_lm.models.__path__):
        try:
            module = importlib.import_module(f"mlx_lm.models.{info.name}")
        except BaseException:  # noqa: BLE001 - a family needing an extra package is not ours to test
            continue
        args = getattr(module, "ModelArgs", None)
        if not dataclasses.is_dataclass(args):
            continue
        for field in dataclasses.fields(args):
            if re.search(r"max|position|ctx|seq|length|context", field.name) and not _NOT_A_LENGTH.search(field.name):
                if field.name not in CONTEXT_KEYS:
                    unread[field.name] = info.name
    assert unread == {}


# ---------------------------------------------------------------------------------------------
# The engine on a GPT-2 of 1,024 positions


@pytest.fixture(scope="module")
def gpt2_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gpt2") / "gpt2"
    return build_family(folder, "gpt2", n_positions=GPT2_POSITIONS, n_ctx=GPT2_POSITIONS)


def prompt_of(folder: Path, tokens: int) -> list[Message]:
    """A one-message conversation whose rendered prompt is exactly `tokens` ids long."""
    tokenizer = load_tokenizer(folder)

    def length(words: int) -> int:
        return len(render_prompt(tokenizer, [Message("user", "cat" + " cat" * words)], False))

    base, step = length(10), length(11) - length(10)
    assert step == 1  # each " cat" is one token
    messages = [Message("user", "cat" + " cat" * (10 + tokens - base))]
    assert len(render_prompt(tokenizer, messages, False)) == tokens
    return messages


@pytest.fixture
def forward_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many ids each of the session's prefill and forward calls was given."""
    from engine.local.session import Session

    calls: list[int] = []
    real_prefill, real_forward = Session.prefill, Session.forward

    def prefill(self: Session, ids: Any, *args: Any) -> Any:
        calls.append(len(ids))
        return real_prefill(self, ids, *args)

    def forward(self: Session, ids: Any) -> Any:
        calls.append(int(ids.size))
        return real_forward(self, ids)

    monkeypatch.setattr(Session, "prefill", prefill)
    monkeypatch.setattr(Session, "forward", forward)
    return calls


async def test_gpt2_limit_comes_from_n_positions(gpt2_model: Path, engine: Engine) -> None:
    info = await engine.load(str(gpt2_model))
    assert info.context_limit == GPT2_POSITIONS


@pytest.mark.parametrize("tokens", [GPT2_POSITIONS, GPT2_POSITIONS + 1, GPT2_POSITIONS + 69])
async def test_a_prompt_that_leaves_no_room_is_refused_before_any_forward_pass(
    tokens: int, gpt2_model: Path, engine: Engine, forward_calls: list[int]
) -> None:
    await engine.load(str(gpt2_model))
    with pytest.raises(ContextLimitError, match=f"is {tokens} tokens but the context limit is {GPT2_POSITIONS}"):
        await run(engine, prompt_of(gpt2_model, tokens))
    assert forward_calls == []


async def test_a_reply_stops_with_length_at_the_limit(gpt2_model: Path, engine: Engine) -> None:
    """Prompt + reply fill the 1,024 positions exactly; every logprob is a number."""
    await engine.load(str(gpt2_model))
    events, finished = await run(engine, prompt_of(gpt2_model, GPT2_POSITIONS - 3), GREEDY.with_changes(max_tokens=50))
    assert (finished.finish_reason, finished.generated_tokens) == ("length", 3)
    assert finished.prompt_tokens + finished.generated_tokens == finished.context_used == GPT2_POSITIONS
    assert all(math.isfinite(e.logprob) for e in events)
    _, last = await run(engine, prompt_of(gpt2_model, GPT2_POSITIONS - 1), GREEDY.with_changes(max_tokens=50))
    assert (last.finish_reason, last.generated_tokens) == ("length", 1)  # one token still fits


async def test_a_model_that_states_no_limit_is_said_once(tmp_path: Path, engine: Engine, chatml_model: Path) -> None:
    """Mamba-2 configs state no length: the loaded model's info carries one note saying so, and
    the limit is mlx-lm's default for the family."""
    info = await engine.load(str(build_family(tmp_path / "mamba2", "mamba2")))
    assert len(info.notes) == 1 and "states no context length" in info.notes[0] and "max_context" in info.notes[0]
    assert info.context_limit == 2056  # mamba2.ModelArgs' default, below DEFAULT_CONTEXT
    assert (await engine.load(str(chatml_model))).notes == ()  # a model that states its limit: nothing to say


def test_logitscope_run_prints_the_note_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.headless import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = build_family(tmp_path / "mamba2", "mamba2")
    code = main(["run", "--model", str(folder), "--prompt", "hi", "--prompt", "more", "--max-tokens", "2"],
                engine_factory=Engine)
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.count("states no context length") == 1 and "[model] max_context" in err
