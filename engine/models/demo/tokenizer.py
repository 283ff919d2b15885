"""A small byte-level BPE tokenizer trained on the demo corpus, with a ChatML chat template.

Why byte-level: every string can be encoded (no unknown token), so users can type anything at
the demo model and the engine never chokes, it just sees rare bytes. Why ChatML: it is the
template most real chat models use, so the demo exercises the same code paths they do.
"""

from __future__ import annotations

from collections.abc import Iterator

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from engine.models.demo.corpus import Chat

PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _texts(chats: list[Chat]) -> Iterator[str]:
    """The plain text the BPE merges are learned from (special tokens are added, not learned)."""
    for chat in chats:
        for message in chat:
            yield message["role"] + "\n"
            yield message["content"]


def train_tokenizer(chats: list[Chat], vocab_size: int) -> PreTrainedTokenizerFast:
    """Learn merges from the corpus and wrap them as a transformers tokenizer.

    ``eos_token`` is ``<|im_end|>``: the end of an assistant turn is where generation stops.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_texts(chats), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD,
        additional_special_tokens=[IM_START],
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )


def render(chat: Chat) -> tuple[str, list[tuple[int, int]]]:
    """The chat as the template renders it, plus the character spans the model must learn.

    The spans cover each assistant reply and its closing ``<|im_end|>``, so training teaches
    the model to answer and to stop, never to imitate the user.
    """
    text = ""
    spans: list[tuple[int, int]] = []
    for message in chat:
        text += f"{IM_START}{message['role']}\n"
        start = len(text)
        text += message["content"] + IM_END
        if message["role"] == "assistant":
            spans.append((start, len(text)))
        text += "\n"
    return text, spans


def encode_with_mask(tokenizer: PreTrainedTokenizerFast, chat: Chat) -> tuple[list[int], list[bool]]:
    """Token ids of the rendered chat and, per token, whether it belongs to an assistant reply."""
    text, spans = render(chat)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids: list[int] = enc["input_ids"]
    mask = [any(s <= a < e for s, e in spans) for a, _ in enc["offset_mapping"]]
    return ids, mask
