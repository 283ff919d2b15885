"""llama.cpp's log, kept off the terminal (the TUI owns it) and read while a model loads.

llama.cpp says some things only in its log: why it refused a file, which end-of-generation tokens
it found, which stage of a load it is in. `LogTail` keeps those; everything else is dropped.
"""

from __future__ import annotations

import ctypes
import functools
import re
from collections import deque
from typing import Any, Callable


class LogTail:
    """What one load said: its last error lines, so a model llama.cpp refuses (an unknown
    pre-tokenizer, a damaged tensor) is reported in llama.cpp's own words, as one line; the
    end-of-generation tokens it lists (``EOG token = 106 '<end_of_turn>'``), which spares asking
    llama.cpp about every id of the vocabulary (`engine.gguf.vocab.LlamaVocab.eog_ids` checks
    them); and each stage it enters, told to the caller as progress."""

    def __init__(self) -> None:
        self._errors: deque[str] = deque(maxlen=16)
        self.eog: list[int] = []
        self._partial = ""
        self._level = 0
        self._phase: Callable[[str], None] = lambda _: None
        self._stage = -1  # the last of `_STAGES` told
        self._vocab_size = 0  # read from the header's lines, for the vocabulary stage

    def clear(self, phase: Callable[[str], None] = lambda _: None) -> None:
        """Forget the last load; `phase` is told each stage of the next one (once, in order)."""
        self._errors.clear()
        self.eog = []
        self._partial = ""
        self._phase, self._stage, self._vocab_size = phase, -1, 0

    def add(self, level: int, text: bytes | None) -> None:
        """One log call (a continuation keeps the level of the line it continues)."""
        if level != _LOG_CONT:
            self._level = level
        if self._level not in (_LOG_ERROR, _LOG_INFO):
            return
        self._partial += (text or b"").decode("utf-8", "replace")
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            if self._level == _LOG_ERROR and line.strip():
                self._errors.append(line.strip())
            elif (found := _EOG_LINE.search(line)) is not None:
                self.eog.append(int(found.group(1)))
            else:
                self._tell_stage(line)

    def _tell_stage(self, line: str) -> None:
        """A line that opens a later stage of the load (by llama.cpp's function prefix) is told
        once; a vocabulary's size is read on the way. Wording llama.cpp changes only goes untold."""
        if (size := _VOCAB_LINE.search(line)) is not None:
            self._vocab_size = int(size.group(1))
        for index, (prefix, stage) in enumerate(_STAGES):
            if index > self._stage and line.startswith(prefix):
                self._stage = index
                count = self._vocab_size
                text = f"{stage} ({count:,} tokens)" if stage == "vocabulary" and count else stage
                try:
                    self._phase(text)
                except Exception:  # noqa: BLE001 - never raise into llama.cpp's log call
                    pass

    def reason(self) -> str:
        """llama.cpp's reason for the last failure: the text after "error loading model:" (its
        loader's wording), else the last error line; control characters dropped, clipped."""
        lines = [*self._errors, self._partial.strip() if self._level == _LOG_ERROR else ""]
        found = next((line.rsplit("error loading model:", 1)[1] for line in reversed(lines)
                      if "error loading model:" in line), None)
        text = found if found is not None else next((line for line in reversed(lines) if line), "")
        return " ".join("".join(c for c in text if c.isprintable()).split())[:200]


_EOG_LINE = re.compile(r"EOG token\s*=\s*(\d+)\b")
_VOCAB_LINE = re.compile(r"tokenizer\.ggml\.tokens\s+arr\[str,(\d+)\]")
# llama.cpp's load, by the function that logs each stage (at INFO): the header, then print_info and
# the vocabulary (most of a 262k-token file's load: gemma-3-270m, 2.7 of 3.7 s), then the weights
# (told as a share by the progress callback)
_STAGES = (("llama_model_loader:", "header"), ("print_info:", "vocabulary"), ("load_tensors:", "weights"))
_LOG_INFO, _LOG_ERROR, _LOG_CONT = 2, 4, 5  # ggml_log_level


def quiet_logs(lib: Any) -> LogTail:
    """Route llama.cpp's log into this process's `LogTail` (nothing reaches the terminal)."""
    tail, callback = _log_sink(lib)
    lib.llama_log_set(callback, ctypes.c_void_p())
    return tail


@functools.cache
def _log_sink(lib: Any) -> tuple[LogTail, Any]:
    """One log callback for the process (cached: llama.cpp keeps calling it after this returns,
    so it must never be freed), and the tail it writes to."""
    tail = LogTail()
    return tail, lib.llama_log_callback(lambda level, text, user_data: tail.add(int(level), text))
