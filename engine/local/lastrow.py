"""Compute a model's output head for the last prompt position only.

Why: a turn's first token comes from the logits after its last prompt id. Feeding the new ids
as a prefill and then the last id as a separate one-token step costs a whole extra forward pass
(on a CPU, about a decode step: ~30 ms for a 30M model, ~300 ms for a 4-bit 0.5B one). Feeding
them all in one pass instead would compute the head for every position: prompt length x vocabulary
x hidden size multiply-adds, of which only the last row is used. With the head restricted to the
last row, the single pass costs no more than the prefill it replaces.

How: mlx-lm models end in either ``self.lm_head(h)`` or, with tied weights,
``self.model.embed_tokens.as_linear(h)``, applied position by position. `LastRowHead` gives those
layers a subclass whose call slices its input to the last position while the context manager is
active. Whether that worked is checked once from the output's shape (the graph is built, never
run). Correctness never depends on it: `Session` always takes the last row of whatever the model
returns; a model whose head is not found keeps the separate one-token step.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn

_FLAG = "_logitscope_last_row_only"


class _LastRowCall:
    """Mixin for an output projection called as ``layer(h)``."""

    def __call__(self, x: mx.array) -> mx.array:
        if getattr(self, _FLAG, False):
            x = x[..., -1:, :]
        return super().__call__(x)  # type: ignore[misc]


class _LastRowAsLinear:
    """Mixin for a tied embedding used as the projection through ``as_linear(h)``."""

    def as_linear(self, x: mx.array) -> mx.array:
        if getattr(self, _FLAG, False):
            x = x[..., -1:, :]
        return super().as_linear(x)  # type: ignore[misc]


def _with_mixin(layer: nn.Module, mixin: type) -> None:
    """Give `layer` a subclass of its current class with `mixin` first (parameters untouched)."""
    kind = type(layer)
    if not issubclass(kind, mixin):
        layer.__class__ = type(f"LastRow{kind.__name__}", (mixin, kind), {})
    object.__setattr__(layer, _FLAG, False)


class LastRowHead:
    """While active (``with head:``), the model's output head sees only the last position."""

    def __init__(self, layers: list[nn.Module]) -> None:
        self.layers = layers

    def __enter__(self) -> "LastRowHead":
        for layer in self.layers:
            object.__setattr__(layer, _FLAG, True)
        return self

    def __exit__(self, *exc: object) -> None:
        for layer in self.layers:
            object.__setattr__(layer, _FLAG, False)


def install_last_row_head(model: Any) -> LastRowHead | None:
    """Find the output head of an mlx-lm model and make it restrictable; None when not found.

    Call after every other change to the model's layer classes (the subclass wraps whatever
    class a layer has at this point).
    """
    layers: list[nn.Module] = []
    head = getattr(model, "lm_head", None)
    if isinstance(head, nn.Module) and callable(head):
        _with_mixin(head, _LastRowCall)
        layers.append(head)
    embedding = getattr(getattr(model, "model", None), "embed_tokens", None)
    if isinstance(embedding, (nn.Embedding, nn.QuantizedEmbedding)):
        _with_mixin(embedding, _LastRowAsLinear)
        layers.append(embedding)
    if not layers:
        return None
    head_only = LastRowHead(layers)
    return head_only if _restricts(model, head_only) else None


def _restricts(model: Any, head: LastRowHead) -> bool:
    """Whether the model's output really has one position with `head` active.

    Only the graph is built (MLX is lazy): shapes are known without computing anything, so this
    costs a few milliseconds of Python and leaves no trace (no cache is passed).
    """
    try:
        with head:
            out = model(mx.zeros((1, 2), dtype=mx.int32))
    except Exception:  # noqa: BLE001 - an unusual model: keep the plain path
        return False
    return isinstance(out, mx.array) and out.ndim == 3 and out.shape[1] == 1
