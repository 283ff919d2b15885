"""engine.gguf.logs.LogTail: what a load said, read from llama.cpp's log lines (no llama.cpp here).

The lines are llama.cpp's own wording (a 0.3.36 load of gemma-3-270m and of a refused file)."""

from __future__ import annotations

from engine.gguf.logs import LogTail

INFO, WARN, ERROR, CONT = 2, 3, 4, 5


def _feed(tail: LogTail, lines: list[tuple[int, str]]) -> None:
    for level, text in lines:
        tail.add(level, text.encode())


def test_the_reason_for_a_refusal_is_llama_cpps_last_words_in_one_line() -> None:
    tail = LogTail()
    _feed(tail, [(ERROR, "llama_model_load: error loading model: error loading model vocabulary: unknown "),
                 (CONT, "pre-tokenizer type: 'x\x1b[31m'\n"),
                 (ERROR, "llama_model_load_from_file_impl: failed to load model\n")])
    assert tail.reason() == "error loading model vocabulary: unknown pre-tokenizer type: 'x[31m'"
    tail.clear()
    assert tail.reason() == ""
    _feed(tail, [(ERROR, "gguf_init_from_file_impl: tensor 'a' data is not within the file bounds\n")])
    assert tail.reason() == "gguf_init_from_file_impl: tensor 'a' data is not within the file bounds"


def test_end_of_generation_tokens_and_stages_are_read_once_in_order() -> None:
    told: list[str] = []
    tail = LogTail()
    tail.clear(told.append)
    _feed(tail, [
        (INFO, "llama_model_loader: loaded meta data with 33 key-value pairs and 236 tensors\n"),
        (INFO, "llama_model_loader: - kv  20:   tokenizer.ggml.tokens arr[str,262144]  = [\"<pad>\", ...\n"),
        (INFO, "print_info: file format = GGUF V3 (latest)\n"),
        (INFO, "llama_model_loader: - type q4_K:  100 tensors\n"),  # an earlier stage's prefix again: not told
        (INFO, "print_info: EOG token             = 1 '<eos>'\n"),
        (INFO, "print_info: EOG token             = 106 '<end_of_turn>'\n"),
        (WARN, "load: control-looking token:    212 '</s>' was not control-type\n"),
        (INFO, "load_tensors: loading model tensors, this can take a while...\n"),
    ])
    assert told == ["header", "vocabulary (262,144 tokens)", "weights"]
    assert tail.eog == [1, 106] and tail.reason() == ""
    tail.clear()
    _feed(tail, [(INFO, "llama_model_loader: loaded meta data\n")])
    assert told == ["header", "vocabulary (262,144 tokens)", "weights"]  # after the load, no one is told


def test_a_listener_that_fails_never_raises_into_llama_cpp() -> None:
    def broken(_: str) -> None:
        raise RuntimeError("a closed screen")

    tail = LogTail()
    tail.clear(broken)
    _feed(tail, [(INFO, "llama_model_loader: loaded meta data\n")])  # no exception
