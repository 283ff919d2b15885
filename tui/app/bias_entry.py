"""The palette's "Set logit bias" with tokens by text as well as by id (#32.4).

``ID=BIAS, 'TEXT'=BIAS, TEXT=BIAS`` (``ban`` for -100): a part whose token is digits is an id;
any other is a token's text, quoted (``' the'=ban``) to keep spaces or commas, resolved by the
loaded tokenizer when the dialog is accepted (`EngineAPI.token_ids`). A text of several tokens
is refused in one line, as `logitscope run` refuses it (no banned strings: `tui.headless.bias`).
"""

from __future__ import annotations

import re

from engine.core.api import EngineAPI, ParamError, SamplingParams
from engine.core.params import BAN

_PART = re.compile(r"""\s*(?:'(?P<sq>[^']*)'|"(?P<dq>[^"]*)"|(?P<bare>[^,;=]+?))\s*=\s*(?P<bias>[^,;]*?)\s*(?:[,;]|$)""")


def parse_entries(text: str) -> tuple[tuple[int | str, float], ...]:
    """(token id or text, bias) for every part; raises ParamError (one line) on bad syntax."""
    out: list[tuple[int | str, float]] = []
    at, text = 0, text.strip()
    while at < len(text):
        match = _PART.match(text, at)
        if match is None or match.end() == at:
            raise ParamError(f"logit_bias needs TOKEN=BIAS parts (an id, or a token's text, quoted to keep "
                             f"spaces), got {text[at:at + 30]!r}")
        quoted = match.group("sq") if match.group("sq") is not None else match.group("dq")
        token = quoted if quoted is not None else match.group("bare").strip()
        bias_text = match.group("bias").strip().lower()
        try:
            bias = BAN if bias_text == "ban" else float(bias_text)
        except ValueError:
            raise ParamError(f"logit_bias needs a number after '=', got {bias_text!r}") from None
        if not BAN <= bias <= 100.0:
            raise ParamError(f"logit_bias: bias must be between {BAN:g} (ban) and 100, got {bias_text}")
        if token == "":
            raise ParamError("logit_bias: a token's text must not be empty")
        out.append((int(token) if quoted is None and token.isdigit() else token, bias))
        at = match.end()
    return tuple(out)


async def resolve_entries(engine: EngineAPI, params: SamplingParams, entries: tuple[tuple[int | str, float], ...],
                          ) -> tuple[SamplingParams, dict[int, str]]:
    """`params` with exactly these biases (texts turned into their one token), and id -> text
    for the ones given by text; raises ParamError for a text that is no single token here."""
    biases: dict[int, float] = {}
    names: dict[int, str] = {}
    for token, bias in entries:
        if isinstance(token, int):
            biases[token] = bias
            continue
        ids = await engine.token_ids(token)
        if len(ids) != 1:
            raise ParamError(f"{token!r} is {len(ids)} tokens for this model: a bias applies to one token, and "
                             "banning a phrase is not supported; give its tokens by id")
        biases[ids[0]] = bias
        names[ids[0]] = token
    return params.with_changes(logit_bias=tuple(sorted(biases.items()))), names
