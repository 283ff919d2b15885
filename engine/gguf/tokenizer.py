"""The GGUF file's own tokenizer as an ordinary fast tokenizer, so the MLX engine's prompt renderer
(``engine.local.prompt``: the chat template, the history rule, replies spliced as their ids) and its
streaming text (``engine.local.textstream``) run unchanged on a GGUF model.

Why not llama.cpp's tokenizer: the renderer needs a Hugging Face tokenizer's interface
(``apply_chat_template``, ``convert_ids_to_tokens``, mlx-lm's streaming detokenizers); and why not
transformers' own GGUF reader: it needs PyTorch. So the vocabulary, merges, special tokens and
chat template are read with the ``gguf`` package and built into a ``tokenizers`` BPE. Each load is
checked against llama.cpp's tokenizer on a probe text (`check_against`): a vocabulary this module
does not build exactly is refused in one line rather than fed ids the model would not produce.

The vocabulary itself is rebuilt by ``engine.gguf.hf_tokenizer`` (shared with the MLX folder
converter, ``engine.gguf.to_mlx``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.core.api import ModelLoadError

PROBE = "Hello, world! It's 2024: naïve café, 你好世界 🙂🚀\n\tdef f(x):  return x**2 \r\n  the cat sat"


def read_metadata(path: Path) -> dict[str, Any]:
    """The file's ``tokenizer.*`` and ``general.*`` keys as plain Python values."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    return {key: field.contents() for key, field in reader.fields.items()
            if key.startswith(("tokenizer.", "general.")) or key.endswith(".context_length")}


def build_tokenizer(meta: dict[str, Any], name: str) -> Any:
    """mlx-lm's TokenizerWrapper around a fast tokenizer built from `meta`. Raises ModelLoadError."""
    from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, SPMStreamingDetokenizer, TokenizerWrapper
    from transformers import PreTrainedTokenizerFast

    from engine.gguf.hf_tokenizer import backend, special_texts

    detokenizer = SPMStreamingDetokenizer if meta.get("tokenizer.ggml.model") == "llama" else BPEStreamingDetokenizer
    fast = PreTrainedTokenizerFast(tokenizer_object=backend(meta, name))
    for attribute, text in special_texts(meta).items():  # as the template and the renderer expect them
        setattr(fast, attribute, text)
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str):
        fast.chat_template = template
    eos = meta.get("tokenizer.ggml.eos_token_id")
    eot = meta.get("tokenizer.ggml.eot_token_id")
    stops = [int(i) for i in (eos, eot) if isinstance(i, int)]
    return TokenizerWrapper(fast, detokenizer, eos_token_ids=sorted(set(stops)) or None)


def check_against(tokenizer: Any, reference: Callable[[str], list[int]], name: str) -> None:
    """Refuse (one line) a tokenizer that splits the probe text unlike llama.cpp's own."""
    ours = list(tokenizer.encode(PROBE, add_special_tokens=False))
    theirs = reference(PROBE)
    if ours != theirs:
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        raise ModelLoadError(f"{name}: its tokenizer could not be rebuilt exactly (differs from llama.cpp's at token {at})")
