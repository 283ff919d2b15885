"""The llama.cpp calls a token makes besides its forward pass, bound so they keep the GIL.

Why: ctypes lets go of the GIL around every foreign call and takes it back afterwards, and
taking it back waits while another thread holds it (up to the interpreter's switch interval).
A GGUF token makes a handful of calls of a microsecond each besides ``llama_decode``: the batch,
the logits pointer, the token's piece, its attributes, end of generation. In the app the event
loop holds the GIL while it draws a frame, so each of them could wait there: measured on the
30M GGUF model in the app (2 cores, `python -m tui.bench.probe_decode`), the engine thread was
busy 71% of the time and waited the rest.

Bound through `ctypes.PyDLL` (the same loaded library, the same symbols, the signatures that
llama-cpp-python declares) they run without letting go of the GIL. Only calls that never block,
never call back into Python and return in microseconds belong in `QUICK`; everything else (the
forward pass above all) keeps releasing it. A binding without the expected library object keeps
its own functions.
"""

from __future__ import annotations

import ctypes
from typing import Any

QUICK = ("llama_batch_get_one", "llama_get_logits_ith", "llama_token_to_piece", "llama_vocab_get_attr",
         "llama_vocab_is_eog")


class QuickLib:
    """The llama_cpp module with the `QUICK` functions keeping the GIL; every other name is the
    module's own."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self.quick: dict[str, Any] = {}
        cdll = getattr(getattr(module, "llama_cpp", None), "_lib", None)
        if not isinstance(cdll, ctypes.CDLL):
            return
        held = ctypes.PyDLL(cdll._name, handle=cdll._handle)
        for name in QUICK:
            try:
                released, kept = getattr(cdll, name), getattr(held, name)
            except AttributeError:  # an older or newer llama.cpp without it: the module's own
                continue
            kept.argtypes, kept.restype = released.argtypes, released.restype
            self.quick[name] = kept

    def __getattr__(self, name: str) -> Any:
        quick = self.__dict__.get("quick", {})
        return quick[name] if name in quick else getattr(self._module, name)
