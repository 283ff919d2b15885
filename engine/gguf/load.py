"""Check and load one GGUF file: the llama.cpp model with its context, and the tokenizer rebuilt
from the file (``engine.gguf.tokenizer``), checked against llama.cpp's own.

Runs on the engine thread. Every mistake a user can make (no such file, not a GGUF file, the
extra not installed, a vocabulary not supported) is one line (`ModelLoadError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine.core.api import LoadProgress, ModelLoadError
from engine.models.ggufs import hub_file, is_gguf_spec  # noqa: F401 - is_gguf_spec: engine.gguf's public name

DEFAULT_CONTEXT = 8192  # llama.cpp allocates the whole KV cache up front: a 128k model would not fit
MAGIC = b"GGUF"
INSTALL_HINT = 'GGUF models need the [gguf] extra: pip install "logitscope[gguf]"'


@dataclass(frozen=True)
class LoadedGguf:
    """A GGUF model ready for a `Session`: the llama.cpp model, the tokenizer, the context limit."""

    model: Any  # engine.gguf.model.LlamaModel
    tokenizer: Any  # mlx-lm's TokenizerWrapper
    path: Path
    name: str
    context: int
    context_note: str
    recommended: tuple[tuple[str, Any], ...] = ()  # general.sampling.* (engine.core.recommended)


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
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as error:
        raise ModelLoadError(f"cannot read {shown}: {error.strerror or error}") from error
    if magic != MAGIC:
        raise ModelLoadError(f"{shown} is not a GGUF file (it does not start with 'GGUF')")
    return path


def load_gguf(spec: str, max_context: int, threads: int,
              report: Callable[[LoadProgress], None] = lambda _: None) -> LoadedGguf:
    """Find (`resolve_gguf`), check, then load `spec` with `threads` llama.cpp threads.
    Raises ModelLoadError."""
    path = check_file(resolve_gguf(spec, report))
    try:
        import gguf  # noqa: F401 - both come with the extra
        import llama_cpp  # noqa: F401
    except ImportError as error:
        raise ModelLoadError(INSTALL_HINT) from error
    from engine.gguf.model import LlamaModel
    from engine.gguf.tokenizer import build_tokenizer, check_against, read_metadata

    try:
        meta = read_metadata(path)
    except Exception as error:  # a truncated or damaged header
        raise ModelLoadError(f"cannot read {path.name}'s metadata: {' '.join(str(error).split())[:160]}") from error
    tokenizer = build_tokenizer(meta, path.name)
    stated = _stated_context(meta)
    context = min(stated or max_context, max_context) if max_context > 0 else min(stated or DEFAULT_CONTEXT,
                                                                                   DEFAULT_CONTEXT)
    model = LlamaModel(path, context, threads)
    try:
        check_against(tokenizer, model.tokenize, path.name)
    except ModelLoadError:
        model.close()
        raise
    from engine.core.recommended import from_gguf

    return LoadedGguf(model, tokenizer, path, path.name, context, _note(stated, context, max_context),
                      from_gguf(meta))


def _stated_context(meta: dict[str, Any]) -> int | None:
    """``<architecture>.context_length`` from the file, if it says."""
    value = meta.get(f"{meta.get('general.architecture')}.context_length")
    return int(value) if isinstance(value, int) and value > 0 else None


def _note(stated: int | None, context: int, max_context: int) -> str:
    """One line when the limit in use is not the model's own."""
    if stated is None:
        return f"the file states no context length; using {context} tokens (set [model] max_context to change it)"
    if context < stated and not (max_context and context == max_context):
        return (f"using {context} of the model's {stated} context positions (llama.cpp reserves them all up "
                "front; set [model] max_context to change it)")
    return ""
