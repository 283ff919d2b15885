"""Write a benchmark model as an ordinary mlx-lm model folder, so the real Engine loads it.

The tokenizer is synthetic but real: a byte-level BPE whose vocabulary is the 256 byte symbols
plus pairs of them, sized to exactly the model's vocabulary (so every id the random model emits
decodes), with a ChatML template. Built in memory in well under a second; nothing is downloaded.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import mlx.nn as nn

from engine.bench.shapes import Shape

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def write_model_folder(folder: Path, shape: Shape, model: nn.Module) -> Path:
    """Save weights, config.json and a tokenizer of exactly the model's vocabulary into `folder`."""
    from mlx_lm.utils import save_config, save_model

    folder.mkdir(parents=True, exist_ok=True)
    save_model(folder, model)
    config = dict(shape.config)
    if shape.bits:
        config["quantization"] = {"group_size": 64, "bits": shape.bits}
    vocab = int(shape.config["vocab_size"])  # type: ignore[call-overload]
    config["eos_token_id"] = vocab - 1  # <|im_end|>, the last special
    save_config(config, folder / "config.json")
    write_tokenizer(folder, vocab)
    return folder


def write_tokenizer(folder: Path, vocab_size: int) -> None:
    """A byte-level BPE with `vocab_size` ids: bytes, byte pairs, byte triples (as many as needed),
    then the ChatML specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    room = max(0, vocab_size - len(alphabet) - len(SPECIALS))
    pairs = list(itertools.islice(itertools.product(alphabet, alphabet), room))
    triples = ((a + b, c) for a, b in pairs for c in alphabet)  # pair + byte, for big vocabularies
    merges = pairs + list(itertools.islice(triples, room - len(pairs)))
    vocab = {symbol: i for i, symbol in enumerate(alphabet)}
    vocab.update({a + b: len(alphabet) + i for i, (a, b) in enumerate(merges)})
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(SPECIALS))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=SPECIALS[2], pad_token=SPECIALS[0],
                                   chat_template=CHATML)
    fast.save_pretrained(str(folder))
    assert len(fast) == vocab_size, (len(fast), vocab_size)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": vocab_size - 1}))
