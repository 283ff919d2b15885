"""Route functions that mlx-lm's models call to faster CPU versions, on chosen threads only.

mlx-lm's model modules call helpers they imported by name: `scaled_dot_product_attention` from
`mlx_lm.models.base`, `swiglu` from `mlx_lm.models.activations`; their rotary embeddings and
norms are `mlx.nn.RoPE` and `mlx.nn.RMSNorm` modules. `install_cpu_routes` swaps each name, in
every loaded model module (and each layer class's `__call__`), for a `ThreadRoute`: on the
threads registered with it, and for the calls its predicate accepts (calls the fast version
computes exactly like the original: prefill calls for attention and SwiGLU, decode ones too for
the layers), it calls the fast version; everything else goes to the original. Other threads in
the process (a benchmark's plain mlx-lm, say) are never affected. The attention softmax and
SwiGLU of a prefill run in `engine.cpu.native`'s vectorized C where it builds, else in MLX.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Callable

import mlx.core as mx
import mlx.nn as nn


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

    from engine.cpu import attention, fastmath, native

    kernels = native.process_kernels()  # vectorized C for the elementwise parts, where it builds
    return {
        "scaled_dot_product_attention": (base.scaled_dot_product_attention, attention.fast_sdpa_with(kernels),
                                         attention.handles_sdpa),
        "swiglu": (activations.swiglu, native.swiglu_with(kernels, fastmath.swiglu), _handles_swiglu),
    }


def _handles_swiglu(gate: mx.array, x: mx.array) -> bool:
    """Prefill calls (several rows) of floating inputs with equal shapes."""
    return gate.ndim >= 2 and gate.size // gate.shape[-1] >= 2 and gate.shape == x.shape \
        and mx.issubdtype(gate.dtype, mx.floating)


def _route_method(cls: type, make_fast: Callable[[], Callable[..., Any]], handles: Callable[..., bool],
                  thread: threading.Thread) -> ThreadRoute:
    """Send `thread`'s calls of `cls.__call__` that `handles` accepts to `make_fast()(module, *args)`.

    The class is patched once per process (the fast call is made then); later installs only
    register their thread.
    """
    route = getattr(cls.__call__, "route", None)
    if not isinstance(route, ThreadRoute):
        route = ThreadRoute(cls.__call__, make_fast(), handles)

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            return route(self, *args, **kwargs)

        __call__.route = route  # type: ignore[attr-defined]
        cls.__call__ = __call__  # type: ignore[method-assign]
    route.threads.add(thread)
    return route


def _class_routes() -> list[tuple[type, Callable[[], Callable[..., Any]], Callable[..., bool]]]:
    """(mlx.nn layer class, what makes its fast call, which calls it takes): layers whose CPU
    fallbacks are separate ops that the fast versions fuse (decode included: every dispatch counts)."""
    from engine.cpu.norms import handles_rms_norm, rms_norm
    from engine.cpu.rope import RopeTables, handles_rope

    return [(nn.RoPE, lambda: RopeTables().rope, handles_rope), (nn.RMSNorm, lambda: rms_norm, handles_rms_norm)]


def install_cpu_routes() -> Callable[[], None]:
    """Route this thread's prefill attention, SwiGLU and rotary embeddings in every loaded mlx-lm
    model to the fast CPU versions; returns the function that routes them back. No-op off the CPU.

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

    installed.extend(_route_method(cls, make, handles, thread) for cls, make, handles in _class_routes())

    def uninstall() -> None:
        for route in installed:
            route.threads.discard(thread)

    return uninstall
