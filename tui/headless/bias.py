"""`run --logit-bias TOKEN=BIAS` with a token's text as well as its id (#32.4).

Ids are known before the model loads; a text is not: it is split by the loaded tokenizer
(`EngineAPI.token_ids`) once the model is in, before the first turn. A text must be one token
there. A phrase of several tokens is refused in one line, deliberately: llama.cpp's and
text-generation-webui's "banned strings" need the decode loop to backtrack (undo the phrase's
tokens once it appears and draw again), which this engine's turns, their statistics and their
saved tokens do not do; biasing each of its tokens instead would silently ban common pieces
of other words.

One flag value is split at commas only when every part is ``ID=BIAS``; otherwise the whole value
is one ``TEXT=BIAS`` (the bias after the last ``=``), so a text may hold commas and ``=``.
``\\n`` and ``\\t`` in a text are a line break and a tab; a leading space is part of the token
(`" the"` and `"the"` are different tokens in most vocabularies).
"""

from __future__ import annotations

import re

from engine.core.api import EngineAPI, ParamError, SamplingParams
from engine.core.params import BAN
from engine.core.text import typed_value

_ID_PAIRS = re.compile(r"^\s*\d+\s*=[^,;]*([,;]\s*\d+\s*=[^,;]*)*[,;]?\s*$")


def split_bias_flags(given: str | list[str]) -> tuple[list[str], list[tuple[str, float]]]:
    """(the values made of ID=BIAS pairs, (text, bias) for each value naming a token by text)."""
    ids, texts = [], []
    for value in given if isinstance(given, list) else [given]:
        if _ID_PAIRS.match(value):
            ids.append(value)
            continue
        text, sep, bias = value.rpartition("=")
        if not sep or not text:
            raise ParamError(f"--logit-bias needs TOKEN=BIAS (an id or a token's text), got {typed_value(value)}")
        try:
            number = BAN if bias.strip().lower() == "ban" else float(bias)
        except ValueError:
            raise ParamError(f"--logit-bias needs a number after '=', got {typed_value(bias)}") from None
        if not BAN <= number <= 100.0:
            raise ParamError(f"--logit-bias: bias must be between {BAN:g} (ban) and 100, got {bias.strip()}")
        texts.append((text.replace("\\n", "\n").replace("\\t", "\t"), number))
    return ids, texts


async def resolve_text_biases(engine: EngineAPI, params: SamplingParams,
                              texts: tuple[tuple[str, float], ...]) -> SamplingParams:
    """`params` with each text's one token biased as given (after the ids given by id); raises
    ParamError in one line for a text that is no single token of this model."""
    if not texts:
        return params
    biases = dict(params.logit_bias)
    for text, bias in texts:
        ids = await engine.token_ids(text)
        if len(ids) != 1:
            shown = ", ".join(str(i) for i in ids[:8]) + (", …" if len(ids) > 8 else "")
            raise ParamError(
                f"--logit-bias {typed_value(text)} is {len(ids)} tokens for this model ({shown or 'none'}): a bias "
                "applies to one token, and banning a phrase is not supported; give its tokens by id")
        biases[ids[0]] = bias
    return params.with_changes(logit_bias=tuple(sorted(biases.items())))
