"""Route functions that mlx-lm's models call to faster CPU versions, on chosen threads only.

mlx-lm's model modules call helpers they imported by name: `scaled_dot_product_attention` from
`mlx_lm.models.base`, `swiglu` from `mlx_lm.models.activations`. `install_cpu_routes` swaps that
name, in every loaded model module, for a `ThreadRoute`: on the threads registered with it, and
for the calls its predicate accepts (multi-token prefill calls with inputs the fast version
computes exactly like the original), it calls the fast version; everything else goes to the
original. Other threads in the process (a benchmark's plain mlx-lm, say) are never affected.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Callable

import mlx.core as mx


class ThreadRoute:
    """Stands in for one helper in a model module."""

    def __init__(self, original: Callable[..., Any], fast: Callable[..., Any], handles: Callable[..., bool]) -> None:
        """`handles(*args, **kwargs)` says whether `fast` may take a call (same arguments)."""
        self.original = original
        self.fast = fast
        self.handles = handles
        # Threads (not idents: the OS reuses those) that take the fast path; a finished thread drops out.
        self.threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.handles(*args, **kwargs) and threading.current_thread() in self.threads:
            return self.fast(*args, **kwargs)
        return self.original(*args, **kwargs)


def _routes() -> dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., bool]]]:
    """name -> (mlx-lm's original, the fast version, which calls it takes)."""
    from mlx_lm.models import activations, base

    from engine import attention, fastmath

    return {
        "scaled_dot_product_attention": (base.scaled_dot_product_attention, attention.fast_sdpa,
                                         attention.handles_sdpa),
        "swiglu": (activations.swiglu, fastmath.swiglu, _handles_swiglu),
    }


def _handles_swiglu(gate: mx.array, x: mx.array) -> bool:
    """Prefill calls (several rows) of floating inputs with equal shapes."""
    return gate.ndim >= 2 and gate.size // gate.shape[-1] >= 2 and gate.shape == x.shape \
        and mx.issubdtype(gate.dtype, mx.floating)


def install_cpu_routes() -> Callable[[], None]:
    """Route this thread's prefill attention and SwiGLU in every loaded mlx-lm model module to
    the fast CPU versions; returns the function that routes them back. No-op off the CPU.

    Call after the model is loaded (its module must be imported), on the thread that runs it.
    """
    if mx.default_device() != mx.cpu:
        return lambda: None
    thread = threading.current_thread()
    routes = _routes()
    installed: list[ThreadRoute] = []
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("mlx_lm.models.") or module is None:
            continue
        for name, (original, fast, handles) in routes.items():
            current = getattr(module, name, None)
            if current is original and module_name not in ("mlx_lm.models.base", "mlx_lm.models.activations"):
                current = ThreadRoute(original, fast, handles)
                setattr(module, name, current)
            if isinstance(current, ThreadRoute):
                current.threads.add(thread)
                installed.append(current)

    def uninstall() -> None:
        for route in installed:
            route.threads.discard(thread)

    return uninstall
