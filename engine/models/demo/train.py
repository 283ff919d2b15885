"""Train the demo chat model with MLX: a few-million-parameter Llama, saved in mlx-lm format.

Why a real architecture and format: the demo model must load through ``mlx_lm.utils.load``
exactly like a downloaded model, so the app has no special path for it. The loss counts only
assistant tokens (including ``<|im_end|>``), so the model learns to answer and to stop.

Call `enable_fast_blas` before this module imports MLX (``engine.models.demo.__main__`` does).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
from mlx.utils import tree_map
from mlx_lm.models import llama
from mlx_lm.utils import get_total_parameters, save_config, save_model
from transformers import PreTrainedTokenizerFast

from engine.models.demo.corpus import make_corpus
from engine.models.demo.tokenizer import encode_with_mask, train_tokenizer

Example = tuple[list[int], list[bool]]


@dataclass(frozen=True)
class TrainConfig:
    """Every number that decides the demo model; the defaults build the shipped one."""

    seed: int = 20240601
    conversations: int = 8000
    vocab_size: int = 1024
    hidden_size: int = 128
    layers: int = 4
    heads: int = 4
    intermediate_size: int = 384
    steps: int = 1800
    batch_size: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    save_dtype: str = "bfloat16"
    output_scale: float = 0.625


def model_config(cfg: TrainConfig, tokenizer: PreTrainedTokenizerFast) -> dict[str, object]:
    """The config.json mlx-lm (and transformers) read: a plain Llama with tied embeddings."""
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.layers,
        "num_attention_heads": cfg.heads,
        "num_key_value_heads": cfg.heads,
        "intermediate_size": cfg.intermediate_size,
        "vocab_size": len(tokenizer),
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 512,
        "tie_word_embeddings": True,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "torch_dtype": cfg.save_dtype,
    }


def make_batches(examples: list[Example], batch_size: int, rng: random.Random) -> Iterator[tuple[mx.array, mx.array, mx.array]]:
    """Endless (inputs, targets, mask) batches of similar-length chats, padded, in seeded order."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    while True:
        rng.shuffle(chunks)
        for chunk in chunks:
            yield _pad([examples[i] for i in chunk])


def _pad(batch: list[Example]) -> tuple[mx.array, mx.array, mx.array]:
    """Right-pad with token 0 (masked out), shift by one for next-token prediction."""
    width = -(-max(len(ids) for ids, _ in batch) // 16) * 16  # few shapes: few recompiles
    ids = [row + [0] * (width - len(row)) for row, _ in batch]
    mask = [m + [False] * (width - len(m)) for _, m in batch]
    tokens = mx.array(ids)
    return tokens[:, :-1], tokens[:, 1:], mx.array(mask)[:, 1:]


def masked_loss(model: nn.Module, inputs: mx.array, targets: mx.array, mask: mx.array) -> mx.array:
    """Mean cross-entropy over assistant tokens only."""
    logits = model(inputs)
    ce = nn.losses.cross_entropy(logits, targets, reduction="none")
    weights = mask.astype(mx.float32)
    return (ce * weights).sum() / mx.maximum(weights.sum(), 1.0)


def schedule(cfg: TrainConfig) -> Callable[[mx.array], mx.array]:
    """Linear warm-up then cosine decay to 10% of the peak rate."""
    warm_steps = max(1, min(cfg.warmup_steps, cfg.steps // 10))
    warm = optim.linear_schedule(cfg.learning_rate * 0.01, cfg.learning_rate, warm_steps)
    decay = optim.cosine_decay(cfg.learning_rate, max(1, cfg.steps - warm_steps), cfg.learning_rate * 0.1)
    return optim.join_schedules([warm, decay], [warm_steps])


def train(cfg: TrainConfig, out: Path, log: Callable[[str], None] = print) -> dict[str, float]:
    """Build corpus, tokenizer and model, train, save to ``out``; return summary numbers."""
    mx.random.seed(cfg.seed)
    chats = make_corpus(cfg.conversations, cfg.seed)
    tokenizer = train_tokenizer(chats, cfg.vocab_size)
    examples = [encode_with_mask(tokenizer, chat) for chat in chats]
    config = model_config(cfg, tokenizer)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    params = int(get_total_parameters(model))
    log(f"{len(chats)} chats, {sum(len(e[0]) for e in examples)} tokens, {params} parameters")
    loss = _run(model, cfg, examples, log)
    _save(model, tokenizer, config, cfg, out)
    return {"parameters": float(params), "final_loss": loss}


def _run(model: nn.Module, cfg: TrainConfig, examples: list[Example], log: Callable[[str], None]) -> float:
    """The training loop; returns the mean loss over the last 50 steps."""
    optimizer = optim.AdamW(learning_rate=schedule(cfg), weight_decay=cfg.weight_decay)
    state = [model.state, optimizer.state]
    loss_and_grad = nn.value_and_grad(model, masked_loss)

    def step(inputs: mx.array, targets: mx.array, mask: mx.array) -> mx.array:
        loss, grads = loss_and_grad(model, inputs, targets, mask)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        optimizer.update(model, grads)
        return loss

    step = mx.compile(step, inputs=state, outputs=state)  # type: ignore[assignment]
    batches = make_batches(examples, cfg.batch_size, random.Random(cfg.seed))
    recent: list[float] = []
    start = time.perf_counter()
    for i in range(1, cfg.steps + 1):
        loss = step(*next(batches))
        mx.eval(state, loss)
        recent = (recent + [cast(float, loss.item())])[-50:]
        if i % 100 == 0 or i == cfg.steps:
            log(f"step {i}/{cfg.steps} loss {sum(recent) / len(recent):.4f} {time.perf_counter() - start:.0f}s")
    return sum(recent) / len(recent)


def soften(model: nn.Module, scale: float) -> None:
    """Multiply every logit by ``scale`` (< 1) by scaling the final norm's weight.

    Why: trained to near-zero loss, the demo model puts 99.9% on "Paris" and the other capitals
    it weighed are invisible in the candidates view. Scaling the logits bakes a temperature of
    ``1 / scale`` into the model: greedy answers are unchanged (the argmax is), the runners-up
    become visible. Applied to the saved weights, so it is part of the recipe, not a hack.
    """
    norm = model.model.norm
    norm.weight = (norm.weight.astype(mx.float32) * scale).astype(norm.weight.dtype)


def _save(model: nn.Module, tokenizer: PreTrainedTokenizerFast, config: dict[str, object], cfg: TrainConfig, out: Path) -> None:
    """Write weights (in ``save_dtype``), config.json, tokenizer files and the recipe."""
    dtype = getattr(mx, cfg.save_dtype)
    model.update(tree_map(lambda w: w.astype(dtype), model.parameters()))
    soften(model, cfg.output_scale)
    out.mkdir(parents=True, exist_ok=True)
    save_model(out, model)
    save_config(dict(config), out / "config.json")
    tokenizer.save_pretrained(str(out))
    (out / "demo_recipe.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
