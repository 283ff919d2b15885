"""GGUF models through an in-process llama.cpp (the ``[gguf]`` extra: llama-cpp-python, gguf).

`GgufEngine` is a third `engine.core.api.EngineAPI`: llama.cpp computes the forward pass, the MLX
engine's own session and turn loop do everything else (``engine.gguf.model``), with an exact numpy
twin of its sampling chain whose statistics overlap llama.cpp's next step (``engine.gguf.decoder``). Nothing
here imports llama.cpp or MLX until a model is loaded, so the base install never needs the extra.
"""

from engine.gguf.engine import GgufEngine, default_threads
from engine.gguf.load import INSTALL_HINT, is_gguf_spec

__all__ = ["INSTALL_HINT", "GgufEngine", "default_threads", "is_gguf_spec"]
