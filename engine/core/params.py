"""The one table of sampling parameters: every other list of them is derived from it.

Each row says everything a door needs about one `engine.core.api.SamplingParams` field: its
limits and type (validation, config, saved files), the value that switches it off (the panel's
"(off)", what a remote request leaves out), its label (panel, palette, notices), its `run` flag,
its key in the panel (lower case steps down, upper case up; None: set from the palette's
"Set ..." only), how a step moves it (a fine step for floats, a ladder for values spanning orders
of magnitude) and its name on an OpenAI-style wire (None: not sent under a common name).

Why one table: a sampler used to be described in five places (limits, flags, keys, panel steps,
the "off" values, the wire's optional pairs) that had to be kept in step by hand; adding a
sampler is now one row here plus its stage in the sampling chain.

Pure data, no imports from the rest of the project, so `engine.core.api` can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    """One sampling parameter as every door sees it (see the module docstring)."""

    name: str
    kind: type  # int or float (a numeric knob); tuple for a list-valued one (its own parser)
    low: float
    high: float
    off: object  # the value that switches the stage off; None when no value does
    label: str
    flag: str | None  # `logitscope run` flag; None: none
    key: str | None = None  # panel key (lower: down, upper: up); None: palette only
    step: float | None = None  # float step in the panel
    ladder: tuple[int, ...] | None = None  # int rungs in the panel
    wire: str | None = None  # OpenAI-style request field, sent when not `off`
    panel: bool = True  # a row of the parameters panel (else shown there only while not `off`)
    check: Callable[[object], object] | None = None  # list-valued: validate, return the stored form
    parse: Callable[[str], object] | None = None  # list-valued: from what a person types
    show: Callable[[object], str] | None = None  # list-valued: as the panel shows it
    append: bool = False  # list-valued flag given once per item (``--logit-bias A=1 --logit-bias B=2``)


# --- the chain's order

# Stage names as llama.cpp's ``--samplers`` spells them. Logit bias always comes first and
# mirostat, when on, replaces the filters and the draw (as in llama.cpp's common/sampling.cpp).
STAGES = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")
MODIFIERS = ("penalties", "dry")  # they shape the raw distribution, so they come first
# llama.cpp's default ``--samplers`` order, the default here.
LLAMA_CPP_ORDER = STAGES
# mlx-lm's ``make_sampler``: the filters at temperature 1, then the draw at the temperature; the
# stages it lacks (DRY, top-nσ, typical-p) where llama.cpp has them.
MLX_LM_ORDER = ("penalties", "dry", "top_n_sigma", "typ_p", "top_p", "min_p", "xtc", "top_k", "temperature")
# logitscope before the order was a setting: temperature first, then the filters on the scaled distribution.
LOGITSCOPE_ORDER = ("penalties", "dry", "temperature", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc")
ORDERS: dict[str, tuple[str, ...]] = {"llama.cpp": LLAMA_CPP_ORDER, "mlx-lm": MLX_LM_ORDER,
                                      "logitscope": LOGITSCOPE_ORDER}


def order_name(order: tuple[str, ...]) -> str:
    """The preset's name for an order, else the order itself (``a;b;c``)."""
    return next((name for name, known in ORDERS.items() if known == order), ";".join(order))


def _check_order(value: object) -> tuple[str, ...]:
    """An order: a preset's name, ``a;b;c`` text or a list naming every stage once, modifiers first."""
    if isinstance(value, str):
        value = ORDERS.get(value.strip()) or tuple(part.strip() for part in value.replace(",", ";").split(";"))
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be {', '.join(ORDERS)} or stage names, got {value!r}"[:160])
    order = tuple(value)
    unknown = [v for v in order if v not in STAGES]
    if unknown:
        raise ValueError(f"has no stage {unknown[0]!r} (stages: {';'.join(STAGES)})"[:160])
    if sorted(order) != sorted(STAGES):
        missing = [s for s in STAGES if s not in order] or ["a stage twice"]
        raise ValueError(f"must name every stage once ({', '.join(missing)} missing)")
    if any(order.index(m) > len(MODIFIERS) - 1 for m in MODIFIERS):
        raise ValueError("must begin with penalties and dry (they shape the raw distribution)")
    return order


# --- logit bias

BAN = -100.0  # a bias at or below this bans the token (applied as -inf)


def _check_bias(value: object) -> tuple[tuple[int, float], ...]:
    """(token id, bias) pairs, one per id, in id order; from pairs or a {id: bias} table."""
    items = value.items() if isinstance(value, dict) else value
    if not isinstance(items, (list, tuple)) and not isinstance(value, dict):
        raise ValueError(f"must be token=bias pairs, got {value!r}"[:160])
    out: dict[int, float] = {}
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ValueError(f"must be token=bias pairs, got {item!r}"[:160])
        token, bias = item
        if isinstance(token, str) and token.strip().isdigit():
            token = int(token)
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < 2**31:
            raise ValueError(f"needs token ids (whole numbers >= 0), got {token!r}"[:160])
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or bias != bias:
            raise ValueError(f"needs numbers as biases, got {bias!r}"[:160])
        if not BAN <= bias <= 100.0:
            raise ValueError(f"bias must be between {BAN:g} (ban) and 100, got {bias!r}"[:160])
        out[token] = float(bias)
    return tuple(sorted(out.items()))


def _parse_bias(text: str) -> tuple[tuple[int, float], ...]:
    """``ID=BIAS, ID=BIAS`` (``ban`` for -100); empty text clears the list."""
    pairs = []
    for part in filter(None, (p.strip() for p in text.replace(";", ",").split(","))):
        token, sep, bias = part.rpartition("=")
        if not sep:
            raise ValueError(f"needs TOKEN=BIAS, got {part!r}"[:160])
        try:
            value = BAN if bias.strip().lower() == "ban" else float(bias)
        except ValueError:
            raise ValueError(f"needs a number after '=', got {bias!r}"[:160]) from None
        pairs.append((token.strip(), value))
    return _check_bias(pairs)


def _show_bias(value: object) -> str:
    pairs = value if isinstance(value, tuple) else ()
    return ", ".join(f"{t}={'ban' if b <= BAN else f'{b:+g}'}" for t, b in pairs) or "none"


# --- DRY sequence breakers


def _check_breakers(value: object) -> tuple[str, ...]:
    """Texts at which a repetition restarts (llama.cpp cuts each to 40 bytes; at most 64 here)."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"must be a list of non-empty texts, got {value!r}"[:160])
    if len(value) > 64:
        raise ValueError(f"holds at most 64 breakers, got {len(value)}")
    return tuple(dict.fromkeys(value))


def _parse_breakers(text: str) -> tuple[str, ...]:
    """Comma-separated, with a backslash-n for a line break and backslash-comma for a comma;
    ``none``: no breakers (as llama.cpp's ``--dry-sequence-breaker none``)."""
    if text.strip().lower() == "none":
        return ()
    parts = text.replace("\\,", "\x00").split(",")
    return _check_breakers(tuple(p.replace("\x00", ",").replace("\\n", "\n").strip(" ")
                                 for p in parts if p.strip(" ")))


def _show_breakers(value: object) -> str:
    items = value if isinstance(value, tuple) else ()
    return " ".join(repr(v)[1:-1] if v.strip() else repr(v) for v in items) or "none"


_TOP_K_LADDER = (0, 1, 2, 3, 5, 10, 20, 40, 50, 100, 200, 500, 1000)
_TOKENS_LADDER = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
_WINDOW_LADDER = (0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)

# Panel order: the rows as the panel lists them, most used first.
PARAMS: tuple[Param, ...] = (
    Param("temperature", float, 0.0, 5.0, None, "temperature", "--temp", "t", step=0.1, wire="temperature"),
    Param("top_p", float, 0.0, 1.0, 1.0, "top-p", "--top-p", "p", step=0.05, wire="top_p"),
    Param("top_k", int, 0, 1_000_000, 0, "top-k", "--top-k", "k", ladder=_TOP_K_LADDER, wire="top_k"),
    Param("min_p", float, 0.0, 1.0, 0.0, "min-p", "--min-p", "m", step=0.01, wire="min_p"),
    Param("repetition_penalty", float, 0.5, 3.0, 1.0, "rep. penalty", "--repetition-penalty", "r", step=0.05,
          wire="repetition_penalty"),
    Param("repetition_context_size", int, 0, 1_000_000, None, "rep. window", "--repetition-context-size",
          ladder=_WINDOW_LADDER, panel=False),
    Param("presence_penalty", float, -5.0, 5.0, 0.0, "presence penalty", "--presence-penalty", step=0.1,
          wire="presence_penalty", panel=False),
    Param("frequency_penalty", float, -5.0, 5.0, 0.0, "frequency penalty", "--frequency-penalty", step=0.1,
          wire="frequency_penalty", panel=False),
    Param("max_tokens", int, 1, 1_000_000, None, "max tokens", "--max-tokens", "x", ladder=_TOKENS_LADDER,
          wire="max_tokens"),
    Param("candidates", int, 0, 100, None, "candidates", "--candidates", "c", ladder=tuple(range(0, 21))),
    Param("seed", int, 0, 2**63 - 1, None, "seed", "--seed", "s", wire="seed"),
    # The samplers beyond the classic ones (llama.cpp's names and defaults); in the panel while on.
    Param("logit_bias", tuple, 0, 0, (), "logit bias", "--logit-bias", panel=False,
          check=_check_bias, parse=_parse_bias, show=_show_bias, append=True),
    Param("dry_multiplier", float, 0.0, 5.0, 0.0, "DRY multiplier", "--dry-multiplier", "d", step=0.1,
          panel=False),
    Param("dry_base", float, 1.0, 4.0, None, "DRY base", "--dry-base", step=0.05, panel=False),
    Param("dry_allowed_length", int, 0, 100, None, "DRY allowed length", "--dry-allowed-length",
          ladder=tuple(range(0, 11)), panel=False),
    Param("dry_penalty_last_n", int, -1, 1_000_000, None, "DRY window", "--dry-penalty-last-n",
          ladder=(-1,) + _WINDOW_LADDER, panel=False),
    Param("dry_sequence_breakers", tuple, 0, 0, None, "DRY breakers", "--dry-sequence-breaker", panel=False,
          check=_check_breakers, parse=_parse_breakers, show=_show_breakers, append=True),
    Param("top_n_sigma", float, 0.0, 10.0, 0.0, "top-nσ", "--top-n-sigma", "g", step=0.1, panel=False),
    Param("typical_p", float, 0.0, 1.0, 1.0, "typical-p", "--typical", "a", step=0.05, panel=False),
    Param("xtc_probability", float, 0.0, 1.0, 0.0, "XTC probability", "--xtc-probability", "v", step=0.05,
          panel=False),
    Param("xtc_threshold", float, 0.0, 1.0, None, "XTC threshold", "--xtc-threshold", step=0.01, panel=False),
    Param("dynatemp_range", float, 0.0, 5.0, 0.0, "dyn. temp range", "--dynatemp-range", step=0.1, panel=False),
    Param("dynatemp_exponent", float, 0.0, 10.0, None, "dyn. temp exponent", "--dynatemp-exp", step=0.1,
          panel=False),
    Param("mirostat", int, 0, 2, 0, "mirostat", "--mirostat", ladder=(0, 2), panel=False),
    Param("mirostat_tau", float, 0.0, 20.0, None, "mirostat tau", "--mirostat-ent", step=0.5, panel=False),
    Param("mirostat_eta", float, 0.0, 1.0, None, "mirostat eta", "--mirostat-lr", step=0.05, panel=False),
    Param("samplers", tuple, 0, 0, None, "order", "--samplers", panel=False, check=_check_order,
          parse=_check_order, show=lambda v: order_name(v) if isinstance(v, tuple) else str(v)),
)

BY_NAME: dict[str, Param] = {p.name: p for p in PARAMS}


def is_on(param: Param, value: object) -> bool:
    """Whether a parameter with an off value is in force (always, for one without)."""
    return param.off is None or value != param.off


def limits() -> dict[str, tuple[float, float, type]]:
    """name -> (lowest, highest, type): what validation, the config and the CLI check against."""
    return {p.name: (p.low, p.high, p.kind) for p in PARAMS}


def flags() -> dict[str, str]:
    """`run` flag -> field name."""
    return {p.flag: p.name for p in PARAMS if p.flag is not None}


def panel_params() -> tuple[tuple[str, str], ...]:
    """(name, label) of the panel's rows, in order."""
    return tuple((p.name, p.label) for p in PARAMS if p.panel)


def keys() -> dict[str, str]:
    """name -> panel key, for the parameters that have one."""
    return {p.name: p.key for p in PARAMS if p.key is not None}


def off_values() -> dict[str, object]:
    """name -> the value that switches it off, for the parameters that have one."""
    return {p.name: p.off for p in PARAMS if p.off is not None}


def wire_optional() -> dict[str, tuple[str, object]]:
    """name -> (wire name, off value) for what a request sends only when on."""
    return {p.name: (p.wire, p.off) for p in PARAMS if p.wire is not None and p.name not in _ALWAYS_SENT}


_ALWAYS_SENT = ("temperature", "max_tokens")  # a request always carries these two
