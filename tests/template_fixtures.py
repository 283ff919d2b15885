"""Chat templates of real model families, on trained tokenizers of both kinds, for template tests.

Each `Family` holds a chat template written as the family publishes it (trimmed of tool calls),
the tokens it begins and ends turns with, and `seen`: the text the model was conditioned on, by
hand, for a two-turn chat. `seen` is the oracle of `tests/test_templates.py`: what the model saw
when it wrote its first reply is what it sees of that reply in the second turn, whatever the
template does to earlier replies (a leading space, trimming, stripped reasoning, a system prompt
that moves to the newest message).

Two tokenizer kinds are trained here, both offline and in well under a second: a byte-level BPE
(GPT-2, Llama-3, Qwen style) and a SentencePiece-style Metaspace BPE (Llama-2, Mistral, Gemma
style) that adds a `▁` at the start of each separately encoded text, which is what makes cutting
a prompt into text runs give ids the whole text never has.
"""

from __future__ import annotations

import json
import shutil
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

from tinymodels import CHATML_TEMPLATE, LLAMA3_TEMPLATE, build_model, corpus

Kind = Literal["bpe", "metaspace"]

SPECIALS = [
    "<unk>", "<s>", "</s>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<bos>", "<eos>", "<start_of_turn>",
    "<end_of_turn>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>", "<|end_of_turn|>", "<think>",
    "</think>",
]

LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)

MISTRAL_TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.last and system_message is defined %}
            {{- '[INST] ' + system_message + '\\n\\n' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content']|trim + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported') }}
    {%- endif %}
{%- endfor %}
"""

GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)

PHI3_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}"
    "{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"
)

# As published: the newline after each `{{ }}` line is part of the output.
ZEPHYR_TEMPLATE = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

VICUNA_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + ' ' }}"
    "{% set loop_messages = messages[1:] %}{% else %}"
    "{{ 'A chat between a curious user and an artificial intelligence assistant. ' }}"
    "{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}"
    "{% if message['role'] == 'user' %}{{ 'USER: ' + message['content'] + ' ' }}"
    "{% else %}{{ 'ASSISTANT: ' + message['content'] + eos_token + ' ' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)

ALPACA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '### Instruction:\\n' + message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '### Response:\\n' + message['content'] + '\\n\\n' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '### Response:\\n' }}{% endif %}"
)

OPENCHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ 'GPT4 Correct ' + message['role'].title() + ': ' + message['content'] + '<|end_of_turn|>'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'GPT4 Correct Assistant:' }}{% endif %}"
)

FALCON_TEMPLATE = (
    "{% for message in messages %}{% if not loop.first %}{{ '\\n' }}{% endif %}"
    "{% if message['role'] == 'system' %}{{ 'System: ' }}{% elif message['role'] == 'user' %}{{ 'User: ' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'Falcon: ' }}{% endif %}{{ message['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '\\n' + 'Falcon:' }}{% endif %}"
)

QWEN3_TEMPLATE = """{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if '</think>' in message.content %}
            {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}
            {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""

# The same template as a model configured with enable_thinking=false renders it.
QWEN3_NO_THINKING_TEMPLATE = "{%- set enable_thinking = false %}\n" + QWEN3_TEMPLATE

# QwQ / Qwen3-*-Thinking-2507 style: the generation prompt opens the <think> block (the reply holds
# only "...</think>"), and earlier replies enter the history without their thinking.
QWQ_TEMPLATE = """{%- for message in messages %}
    {%- if message.role == "assistant" %}
        {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}
        {{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n<think>\\n' }}
{%- endif %}"""

# DeepSeek-R1 distill style (its own role markers; the generation prompt ends in "<think>\n").
R1_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '<|user|>' + message['content'] }}{% elif message['role'] == 'assistant' %}"
    "{% set content = message['content'] %}{% if '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '<|assistant|>' + content + eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|><think>\\n' }}{% endif %}"
)

PLAIN_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + '\\n' }}"
    "{% else %}{{ message['content'] + '\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

Seen = Callable[[str | None, str, str, str], str]  # (system, user 1, reply, user 2) -> text


@dataclass(frozen=True)
class Family:
    """One family's chat template, its bos and stop tokens, and the oracle text."""

    template: str
    bos: str | None
    eos: str
    seen: Seen
    system: bool = True  # whether the template takes a system prompt


def _chatml(s: str | None, u1: str, r: str, u2: str, gen: str = "") -> str:
    head = f"<|im_start|>system\n{s}<|im_end|>\n" if s else ""
    return (f"{head}<|im_start|>user\n{u1}<|im_end|>\n<|im_start|>assistant\n{gen}{r}<|im_end|>\n"
            f"<|im_start|>user\n{u2}<|im_end|>\n<|im_start|>assistant\n{gen}")


def _llama3(s: str | None, u1: str, r: str, u2: str) -> str:
    def turn(role: str, text: str) -> str:
        return f"<|start_header_id|>{role}<|end_header_id|>\n\n{text}"
    head = turn("system", s) + "<|eot_id|>" if s else ""
    return ("<|begin_of_text|>" + head + turn("user", u1) + "<|eot_id|>" + turn("assistant", r) + "<|eot_id|>"
            + turn("user", u2) + "<|eot_id|>" + turn("assistant", ""))


def _llama2(s: str | None, u1: str, r: str, u2: str) -> str:
    first = f"<<SYS>>\n{s}\n<</SYS>>\n\n{u1}" if s else u1
    return f"<s>[INST] {first} [/INST]{r}</s><s>[INST] {u2} [/INST]"


def _mistral(s: str | None, u1: str, r: str, u2: str) -> str:
    def ask(u: str) -> str:
        return f"[INST] {s}\n\n{u}[/INST]" if s else f"[INST] {u}[/INST]"
    return f"<s>{ask(u1)}{r}</s>{ask(u2)}"  # the system prompt moves to the newest message


FAMILIES: dict[str, Family] = {
    "chatml": Family(CHATML_TEMPLATE, None, "<|im_end|>", _chatml),
    "llama3": Family(LLAMA3_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>", _llama3),
    "llama2": Family(LLAMA2_TEMPLATE, "<s>", "</s>", _llama2),
    "mistral": Family(MISTRAL_TEMPLATE, "<s>", "</s>", _mistral),
    "gemma": Family(GEMMA_TEMPLATE, "<bos>", "<end_of_turn>", lambda s, u1, r, u2: (
        f"<bos><start_of_turn>user\n{u1}<end_of_turn>\n<start_of_turn>model\n{r}<end_of_turn>\n"
        f"<start_of_turn>user\n{u2}<end_of_turn>\n<start_of_turn>model\n"), system=False),
    "phi3": Family(PHI3_TEMPLATE, None, "<|end|>", lambda s, u1, r, u2: (
        (f"<|system|>\n{s}<|end|>\n" if s else "")
        + f"<|user|>\n{u1}<|end|>\n<|assistant|>\n{r}<|end|>\n<|user|>\n{u2}<|end|>\n<|assistant|>\n")),
    "zephyr": Family(ZEPHYR_TEMPLATE, None, "</s>", lambda s, u1, r, u2: (
        (f"<|system|>\n{s}</s>\n" if s else "")
        + f"<|user|>\n{u1}</s>\n<|assistant|>\n{r}</s>\n<|user|>\n{u2}</s>\n<|assistant|>\n")),
    "vicuna": Family(VICUNA_TEMPLATE, None, "</s>", lambda s, u1, r, u2: (
        (s or "A chat between a curious user and an artificial intelligence assistant.")
        + f" USER: {u1} ASSISTANT:{r}</s> USER: {u2} ASSISTANT:")),
    "alpaca": Family(ALPACA_TEMPLATE, None, "</s>", lambda s, u1, r, u2: (
        (f"{s}\n\n" if s else "")
        + f"### Instruction:\n{u1}\n\n### Response:\n{r}\n\n### Instruction:\n{u2}\n\n### Response:\n")),
    "openchat": Family(OPENCHAT_TEMPLATE, "<s>", "<|end_of_turn|>", lambda s, u1, r, u2: (
        f"<s>GPT4 Correct User: {u1}<|end_of_turn|>GPT4 Correct Assistant:{r}<|end_of_turn|>"
        f"GPT4 Correct User: {u2}<|end_of_turn|>GPT4 Correct Assistant:"), system=False),
    "falcon": Family(FALCON_TEMPLATE, None, "<|endoftext|>", lambda s, u1, r, u2: (
        (f"System: {s}\n" if s else "") + f"User: {u1}\nFalcon:{r}\nUser: {u2}\nFalcon:")),
    "qwen3": Family(QWEN3_TEMPLATE, None, "<|im_end|>", _chatml),
    "qwen3_no_thinking": Family(QWEN3_NO_THINKING_TEMPLATE, None, "<|im_end|>", lambda s, u1, r, u2: (
        _chatml(s, u1, r, u2, gen="<think>\n\n</think>\n\n"))),
    "qwq": Family(QWQ_TEMPLATE, None, "<|im_end|>", lambda s, u1, r, u2: (
        _chatml(s, u1, r, u2, gen="<think>\n")), system=False),
    "r1": Family(R1_TEMPLATE, "<s>", "</s>", lambda s, u1, r, u2: (
        f"<s><|user|>{u1}<|assistant|><think>\n{r}</s><|user|>{u2}<|assistant|><think>\n"), system=False),
    "plain": Family(PLAIN_TEMPLATE, None, "</s>", lambda s, u1, r, u2: (
        (f"{s}\n" if s else "") + f"User: {u1}\nAssistant:{r}\nUser: {u2}\nAssistant:")),
}


def train_tokenizer(folder: Path, kind: Kind, vocab_size: int = 420) -> int:
    """Train a `kind` tokenizer holding every family's special tokens; save it; returns its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:  # SentencePiece-style: spaces become ▁, and a ▁ starts each separately encoded text
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
        alphabet = sorted(set(string.printable) - set(" \t\r\x0b\x0c")) + ["▁"]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, initial_alphabet=alphabet,
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", additional_special_tokens=SPECIALS[1:])
    fast.save_pretrained(str(folder))
    return len(fast)


def family_model(root: Path, kind: Kind, family: str) -> Path:
    """A tiny Llama folder whose tokenizer is `kind` and whose chat template is `family`'s.

    The weights and the trained tokenizer are made once per kind under `root` and copied; only
    the template, bos and stop token differ between families.
    """
    base = root / f"base-{kind}"
    if not base.exists():
        build_model(base, "none")  # a Llama of the right shape; its tokenizer is replaced next
        _rebuild_for_vocab(base, train_tokenizer(base, kind))
    folder = root / f"{kind}-{family}"
    if folder.exists():
        return folder
    shutil.copytree(base, folder)
    spec = FAMILIES[family]
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    settings.update(chat_template=spec.template, bos_token=spec.bos, eos_token=spec.eos)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["eos_token_id"] = SPECIALS.index(spec.eos)
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder


def _rebuild_for_vocab(folder: Path, vocab: int) -> None:
    """Rewrite `folder`'s random Llama weights for a `vocab`-token vocabulary (peaky, seeded)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models.llama import Model, ModelArgs
    from tinymodels import _make_peaky

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(vocab_size=vocab, eos_token_id=SPECIALS.index("</s>"))
    mx.random.seed(7)
    model = Model(ModelArgs.from_dict(config))
    _make_peaky(model)
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
