"""GGUF models through an in-process llama.cpp (the ``[gguf]`` extra: llama-cpp-python, gguf).

The local engine reads ``.gguf`` files through `GgufLoader` (``engine.gguf.loader``): llama.cpp
computes the forward pass, the engine's own session and turn loop do everything else
(``engine.gguf.model``), with an exact numpy twin of its sampling chain whose statistics overlap
llama.cpp's next step (``engine.gguf.decoder``). Nothing here imports llama.cpp or MLX until a
model is loaded, so the base install never needs the extra.
"""

from engine.gguf.load import INSTALL_HINT, is_gguf_spec
from engine.gguf.loader import GgufLoader
from engine.gguf.threads import default_threads, env_threads
from engine.gguf.to_mlx import convert_to_mlx

__all__ = ["INSTALL_HINT", "GgufLoader", "convert_to_mlx", "default_threads", "env_threads", "is_gguf_spec"]
