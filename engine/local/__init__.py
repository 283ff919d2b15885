"""The engine proper: one engine thread that owns MLX (or llama.cpp, through `engine.gguf`'s
loader), its commands and async facade, a turn (render, reuse the cache, prefill, decode), the
sampling chain and its statistics, what-if previews and the text of a stream."""
