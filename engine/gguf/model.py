"""A llama.cpp model and context shaped like an mlx-lm model and its cache, so that the MLX
engine's own turn machinery (``engine.local.session``, ``engine.local.turn``: the longest-common-prefix trim,
prefill, the decode loop, the sampling chain in ``engine.local.sampling``) drives a GGUF file unchanged.

Why this shape rather than a second turn loop: every rule of the contract (the exact id list in
the cache, replies spliced as their ids, live parameters, cancel between tokens, the numbers on
screen) then holds by construction, tested once. llama.cpp computes the forward pass; the one
logits row per token goes to the numpy twin of the MLX engine's sampling chain (``engine.gguf.decoder``).

Every call here runs on the engine thread (``engine.local.worker``), like every MLX call.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx
import numpy as np

from engine.core.api import EngineError, ModelLoadError
from engine.gguf.gilcalls import QuickLib
from engine.gguf.logs import quiet_logs
from engine.gguf.rows import SEQUENCES, RowsCache, rows_logits_decode, rows_that_fit
from engine.gguf.sidethread import SideThread
from engine.gguf.vocab import LlamaVocab, ftype_name

GGML_TYPE_F32 = 0
FLASH_ATTN_DISABLED = 0  # llama_flash_attn_type
_ALL_F32 = 0  # llama_ftype of a file whose matrices are all float32


@dataclass(frozen=True)
class Args:
    """What the engine reads from a model's ``args`` (the vocabulary size)."""

    vocab_size: int


class LlamaCache:
    """The context's KV memory seen as one trimmable mlx-lm cache layer.

    ``offset`` is how many positions the memory holds; `trim` removes the newest ones with
    ``llama_memory_seq_rm``, so a regenerate or an edit keeps everything before the divergence.
    """

    def __init__(self, model: LlamaModel) -> None:
        self.model = model
        self.offset = 0

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        """Drop the newest `n` positions (all of them at most); returns how many were dropped."""
        n = min(max(n, 0), self.offset)
        if n:
            self.model.remove_from(self.offset - n)
            self.offset -= n
        return n

    @property
    def state(self) -> list[mx.array]:
        """Nothing for MLX to evaluate: llama.cpp's memory is computed eagerly."""
        return []


class LlamaModel:
    """One GGUF model and its llama.cpp context, called like an mlx-lm model."""

    def __init__(self, path: Path, n_ctx: int, threads: int, batch: int = 512,
                 progress: Callable[[float], None] = lambda _: None,
                 phase: Callable[[str], None] = lambda _: None) -> None:
        """Load `path` with a context of `n_ctx` positions (0: none yet, see `open_context`),
        `progress` told the share of the weights read so far and `phase` each stage before them
        (`LogTail`: most of a big vocabulary's load happens before any weight). Raises ModelLoadError (one line:
        llama.cpp's own reason when it refuses the file)."""
        import llama_cpp

        self._lib = QuickLib(llama_cpp)  # the per-token calls keep the GIL (`engine.gguf.gilcalls`)
        logs = quiet_logs(llama_cpp)
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        callback = llama_cpp.llama_progress_callback(lambda fraction, _user: _told(progress, fraction))
        params.progress_callback = callback  # kept alive by `callback` until the load returns
        logs.clear(phase)
        self._model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not self._model:
            reason = logs.reason()
            logs.clear()
            raise ModelLoadError(f"llama.cpp could not load {path.name}: {reason}" if reason else
                                 f"llama.cpp could not load {path.name} (not a model it knows, or damaged)")
        self.context_train = int(llama_cpp.llama_model_n_ctx_train(self._model))
        self.vocab = LlamaVocab(self._lib, self._model, listed_eog=logs.eog)
        logs.clear()  # the stages are over: nothing is told after the load
        self._vocab = self.vocab.pointer
        self.args = Args(self.vocab.size)
        self.batch, self.threads = batch, threads
        self.n_ctx, self._ctx = 0, None
        all_f32 = int(llama_cpp.llama_model_ftype(self._model)) == _ALL_F32
        self.kv_type = "f32" if all_f32 else "f16"  # the KV cache's element type (its state files differ)
        if n_ctx > 0:
            self.open_context(n_ctx)
        self.cache_layer: LlamaCache | None = None
        # the GGUF decoder's statistics run here while llama.cpp decodes (`engine.gguf.decoder`)
        self.stats_thread = SideThread("logitscope-stats")
        self._view: tuple[int, np.ndarray] | None = None  # (address, numpy view) of the logits buffer

    def open_context(self, n_ctx: int) -> None:
        """Make the context of `n_ctx` positions (`n_ctx` 0 at construction leaves it to the
        caller, who may need the model's own length first: `context_train`)."""
        self.n_ctx = n_ctx
        self._ctx = self._new_context(all_f32=int(self._lib.llama_model_ftype(self._model)) == _ALL_F32)

    def _new_context(self, all_f32: bool) -> Any:
        """A context of `n_ctx` positions. An all-float32 file keeps float32 keys and values and
        plain attention, so its numbers match the MLX engine's float32 ones: llama.cpp's defaults
        (a float16 cache, flash attention, which rounds through float16 on the CPU) moved the
        tiny test model's logprobs by 9e-3; without them by 7e-6."""
        lib = self._lib
        params = lib.llama_context_default_params()
        params.n_ctx = self.n_ctx
        params.n_batch = params.n_ubatch = self.batch
        params.n_threads = params.n_threads_batch = self.threads
        # one unified KV buffer for the chat (sequence 0) and what-if preview rows, which share
        # the chat's cells (`engine.gguf.rows`); split buffers would give each sequence n_ctx / n
        params.n_seq_max = SEQUENCES
        params.kv_unified = True
        params.n_outputs_max = max(self.batch, SEQUENCES)  # llama.cpp reserves a row per sequence (asserts it)
        if all_f32:
            params.type_k = params.type_v = GGML_TYPE_F32
            params.flash_attn_type = FLASH_ATTN_DISABLED
        ctx = lib.llama_init_from_model(self._model, params)
        if not ctx:
            raise ModelLoadError(f"llama.cpp could not make a context of {self.n_ctx} positions")
        return ctx

    def set_threads(self, threads: int) -> None:
        """Decode and prefill with `threads` threads from the next call (llama_set_n_threads)."""
        self.threads = threads
        if self._ctx is not None:
            self._lib.llama_set_n_threads(self._ctx, threads, threads)

    def make_cache(self) -> list[LlamaCache]:
        """A fresh, empty cache: the context's memory is cleared with it."""
        self.remove_from(0)
        self.cache_layer = LlamaCache(self)
        return [self.cache_layer]

    def remove_from(self, position: int) -> None:
        """Forget every position from `position` on."""
        memory = self._lib.llama_get_memory(self._ctx)
        if not self._lib.llama_memory_seq_rm(memory, 0, position, -1):
            raise EngineError(f"llama.cpp could not cut its cache back to {position} positions")

    def __call__(self, ids: mx.array, cache: list[Any]) -> mx.array:
        """Feed (1, L) ids to the chat's cache: the logits after the last one, (1, 1, vocab) float32;
        or (k, L) ids to a preview's `batch_cache`: each row's last logits, (k, 1, vocab).

        Several rows only with a preview's cache, whose rows are sequences of their own (fed to
        the chat's one sequence they would be one long row, silently wrong)."""
        rows = np.asarray(ids)
        if cache and isinstance(cache[0], RowsCache) and rows.ndim == 2:
            return mx.array(cache[0].feed(rows))[:, None]
        if rows.ndim != 2 or rows.shape[0] != 1:
            raise EngineError(f"the GGUF engine feeds one sequence at a time, not ids of shape {rows.shape}")
        return mx.array(self.feed([int(i) for i in rows[0]], cache))[None, None]  # mx.array copies the view

    def rows_logits(self, tokens: list[int], cache: list[Any]) -> np.ndarray:
        """Feed `tokens` (at most `batch`) to the chat's cache, or to a one-row preview cache (a
        probe), with the logits of every one: (len(tokens), vocab) float32, a copy (scoring:
        `engine.local.scoring`)."""
        if not 0 < len(tokens) <= self.batch:
            raise EngineError(f"llama.cpp scores 1 to {self.batch} tokens at a time, not {len(tokens)}")
        layer = cache[0]
        if isinstance(layer, RowsCache):
            return layer.feed_rows(tokens)
        rows_logits_decode(self, tokens, 0, layer.offset)
        layer.offset += len(tokens)
        return self.all_logits(len(tokens))

    def all_logits(self, count: int) -> np.ndarray:
        """A copy of the logits of the last decode's `count` outputs (every entry asked them)."""
        pointer = self._lib.llama_get_logits(self._ctx)
        if not pointer:
            raise EngineError("llama.cpp returned no logits")
        return np.ctypeslib.as_array(pointer, shape=(count, self.args.vocab_size)).copy()

    def batch_cache(self, position: int, rows: int) -> list[RowsCache]:
        """A what-if preview's cache: `rows` sequences sharing the chat's first `position` cells
        (`engine.gguf.rows`); close it to give the cells back."""
        return [RowsCache(self, position, rows)]

    def preview_rows(self, cells_per_row: int) -> int:
        """How many preview rows of `cells_per_row` new cells fit beside the chat's cache now."""
        used = self.cache_layer.offset if self.cache_layer is not None else 0
        return rows_that_fit(self, used, cells_per_row)

    @property
    def lib(self) -> Any:
        """The llama_cpp module (its C functions)."""
        return self._lib

    def memory(self) -> Any:
        """The context's KV memory (for the sequence calls)."""
        return self._lib.llama_get_memory(self._ctx)

    def context(self) -> Any:
        """The llama.cpp context."""
        return self._ctx

    def logits_at(self, index: int) -> np.ndarray:
        """A copy of the logits of output `index` of the last decode."""
        pointer = self._lib.llama_get_logits_ith(self._ctx, index)
        if not pointer:
            raise EngineError(f"llama.cpp returned no logits for batch entry {index}")
        return np.ctypeslib.as_array(pointer, shape=(self.args.vocab_size,)).copy()

    def feed(self, tokens: list[int], cache: list[LlamaCache]) -> np.ndarray:
        """Feed `tokens` in batches; llama.cpp's own buffer of the last one's logits, valid until
        the next decode (the GGUF decoder's sampler copies it once, `engine.gguf.sampler`)."""
        for start in range(0, len(tokens), self.batch):
            part = tokens[start:start + self.batch]
            self.decode(part)
            cache[0].offset += len(part)
        return self._logits_view()

    def decode(self, tokens: list[int]) -> None:
        """Run llama.cpp on `tokens` after what its memory holds (logits for the last one only).

        At most `batch` tokens: llama.cpp asserts it, and its assert aborts the process
        (`feed` splits longer runs)."""
        if not 0 < len(tokens) <= self.batch:
            raise EngineError(f"llama.cpp decodes 1 to {self.batch} tokens at a time, not {len(tokens)}")
        array = (self._lib.llama_token * len(tokens))(*tokens)
        status = self._lib.llama_decode(self._ctx, self._lib.llama_batch_get_one(array, len(tokens)))
        if status != 0:
            raise EngineError(f"llama.cpp could not decode {len(tokens)} tokens (status {status})")

    def last_logits(self) -> np.ndarray:
        """A copy of the last decoded position's logits (llama.cpp reuses its buffer)."""
        return self._logits_view().copy()

    def _logits_view(self) -> np.ndarray:
        """llama.cpp's own buffer of the last position's logits: valid until the next decode."""
        pointer = self._lib.llama_get_logits_ith(self._ctx, -1)
        if not pointer:
            raise EngineError("llama.cpp returned no logits for the last position")
        address = ctypes.addressof(pointer.contents)
        if self._view is None or self._view[0] != address:  # a new view costs ~15 us a token
            self._view = (address, np.ctypeslib.as_array(pointer, shape=(self.args.vocab_size,)))
        return self._view[1]

    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's own tokenization of `text` (special tokens parsed, none added)."""
        return self.vocab.tokenize(text)

    def file_type_name(self) -> str:
        """The file's quantization as llama.cpp's quantize tool names it (e.g. "Q4_K_M", "F16")."""
        return ftype_name(int(self._lib.llama_model_ftype(self._model)))

    def parameters(self) -> int:
        """How many weights the file holds."""
        return int(self._lib.llama_model_n_params(self._model))

    def close(self) -> None:
        """Free the context and the model (on the engine thread), and end the statistics thread."""
        self.stats_thread.close()
        if self._ctx:
            self._lib.llama_free(self._ctx)
            self._ctx = None
        if self._model:
            self._lib.llama_model_free(self._model)
            self._model = None


def _told(progress: Callable[[float], None], fraction: float) -> bool:
    """llama.cpp's progress callback: pass the fraction on; True lets the load go on (a failing
    listener must not abort the load, nor raise into C)."""
    try:
        progress(float(fraction))
    except Exception:  # noqa: BLE001 - the load matters more than one progress line
        pass
    return True
