"""Check and load one GGUF file: the llama.cpp model with its context, and llama.cpp's own
tokenizer for it (``engine.gguf.tokenizer``).

Nothing here parses the file in Python: llama.cpp reads it (with progress), and the little
metadata the engine needs (the context length, the chat template, the quantization) is asked of
llama.cpp. Runs on the engine thread. Every mistake a user can make (no such file, not a GGUF
file, the extra not installed, a vocabulary llama.cpp refuses) is one line (`ModelLoadError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine.core.api import LoadProgress, ModelLoadError
from engine.core.regular import open_regular
from engine.models.ggufs import hub_file, is_gguf_spec  # noqa: F401 - is_gguf_spec: engine.gguf's public name

DEFAULT_CONTEXT = 8192  # llama.cpp allocates the whole KV cache up front: a 128k model would not fit
MAGIC = b"GGUF"
INSTALL_COMMAND = 'python3 -m pip install ".[gguf]"'  # as README's "GGUF models" has it (from logitscope's folder)
INSTALL_HINT = f"GGUF models need the [gguf] extra: in logitscope's folder, {INSTALL_COMMAND}"


@dataclass(frozen=True)
class LoadedGguf:
    """A GGUF model ready for a `Session`: the llama.cpp model, the tokenizer, the context limit."""

    model: Any  # engine.gguf.model.LlamaModel
    tokenizer: Any  # engine.gguf.tokenizer.GgufTokenizer (llama.cpp's own)
    path: Path
    name: str
    context: int
    context_note: str


def resolve_gguf(spec: str, report: Callable[[LoadProgress], None]) -> str:
    """A local path for `spec`: itself, or for ``owner/repo/[folder/]file.gguf`` (not a local file)
    that file from the Hugging Face hub, downloaded once into its cache with progress; one line on failure."""
    found = hub_file(spec)
    if found is None:
        return spec
    from huggingface_hub import hf_hub_download

    from engine.models.download import download_error, progress_class

    repo_id, filename = found
    report(LoadProgress(f"looking for {filename} in {repo_id} on Hugging Face"))
    try:
        return str(hf_hub_download(repo_id, filename, tqdm_class=progress_class(repo_id, report)))
    except Exception as error:  # noqa: BLE001 - every hub failure becomes one line for the user
        if type(error).__name__ == "EntryNotFoundError":
            raise ModelLoadError(f"{repo_id} has no file {filename}") from error
        raise download_error(repo_id, error) from error


def check_file(spec: str) -> Path:
    """The file `spec` names, if it is a readable GGUF file; else one line saying what is wrong."""
    path = Path(spec).expanduser()
    shown = path.name or spec
    if not path.exists():
        raise ModelLoadError(f"no such GGUF file: {shown}")
    if not path.is_file():
        raise ModelLoadError(f"{shown} is not a regular file")
    try:
        with open_regular(path) as handle:
            magic = handle.read(4)
    except OSError as error:
        raise ModelLoadError(f"cannot read {shown}: {error.strerror or error}") from error
    if magic != MAGIC:
        raise ModelLoadError(f"{shown} is not a GGUF file (it does not start with 'GGUF')")
    return path


def load_gguf(spec: str, max_context: int, threads: int,
              report: Callable[[LoadProgress], None] = lambda _: None) -> LoadedGguf:
    """Find (`resolve_gguf`), check, then load `spec` with `threads` llama.cpp threads, reporting
    each stage of llama.cpp's load and the share of the weights read. Raises ModelLoadError."""
    path = check_file(resolve_gguf(spec, report))
    try:
        import llama_cpp  # noqa: F401 - comes with the extra
    except ImportError as error:
        raise ModelLoadError(INSTALL_HINT) from error
    from engine.gguf.model import LlamaModel
    from engine.gguf.tokenizer import GgufTokenizer

    shown = [-1]  # the last whole percent reported: llama.cpp calls back once per tensor

    def progress(fraction: float) -> None:
        percent = int(min(max(fraction, 0.0), 1.0) * 100)
        if percent != shown[0]:
            shown[0] = percent
            report(LoadProgress(f"loading {path.name} with llama.cpp: weights", percent / 100))

    def phase(stage: str) -> None:
        report(LoadProgress(f"loading {path.name} with llama.cpp: {stage}"))

    model = LlamaModel(path, 0, threads, progress=progress, phase=phase)
    try:
        tokenizer = GgufTokenizer(model.vocab, model.vocab.chat_template())
        stated = model.context_train if model.context_train > 0 else None
        context = min(stated or max_context, max_context) if max_context > 0 else min(stated or DEFAULT_CONTEXT,
                                                                                       DEFAULT_CONTEXT)
        phase(f"a context of {context:,} positions")
        model.open_context(context)
    except BaseException:
        model.close()
        raise
    return LoadedGguf(model, tokenizer, path, path.name, context, _note(stated, context, max_context))


def _note(stated: int | None, context: int, max_context: int) -> str:
    """One line when the limit in use is not the model's own."""
    if stated is None:
        return f"the file states no context length; using {context} tokens (set [model] max_context to change it)"
    if context < stated and not (max_context and context == max_context):
        return (f"using {context} of the model's {stated} context positions (llama.cpp reserves them all up "
                "front; set [model] max_context to change it)")
    return ""
