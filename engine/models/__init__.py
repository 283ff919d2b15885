"""Where models come from: the demo, a local folder or the Hugging Face hub (`hub`, no MLX), and
turning one into a loaded model and tokenizer (`load`, on the engine thread).

The names below are the package's public surface; the TUI uses only these.
"""

from engine.models.hub import (
    DEMO_SPEC,
    ModelEntry,
    check_model_folder,
    demo_model_path,
    folder_models,
    is_loadable_folder,
    list_local_models,
    looks_like_repo_id,
    normalise_spec,
    one_line,
    recent_models,
    record_recent,
    resolve_model,
)
from engine.models.ggufs import is_gguf_spec
from engine.models.load import LoadedModel, load_model
from engine.models.size import weights_bytes, why_it_does_not_fit

__all__ = [
    "DEMO_SPEC",
    "LoadedModel",
    "ModelEntry",
    "check_model_folder",
    "demo_model_path",
    "folder_models",
    "is_gguf_spec",
    "is_loadable_folder",
    "list_local_models",
    "load_model",
    "looks_like_repo_id",
    "normalise_spec",
    "one_line",
    "recent_models",
    "record_recent",
    "weights_bytes",
    "why_it_does_not_fit",
    "resolve_model",
]
