"""Downloading a model from the Hugging Face hub, with progress reported as `LoadProgress` and
every failure turned into one line that says what to do (used for MLX repos and GGUF files).

Nothing here imports MLX.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

from engine.core.api import LoadProgress, ModelLoadError
from engine.core.text import error_line as one_line  # the one shortener of error lines

Report = Callable[[LoadProgress], None]
# What mlx-lm itself downloads (mlx_lm.utils.DEFAULT_ALLOW_PATTERNS): weights in safetensors only,
# so a PyTorch-only repo never pulls gigabytes of .bin files it cannot use.
ALLOW_PATTERNS = (
    "*.json", "model*.safetensors", "*.py", "tokenizer.model", "*.tiktoken", "tiktoken.model",
    "*.txt", "*.jsonl", "*.jinja",
)




def progress_class(repo_id: str, report: Report) -> type:
    """A tqdm class that forwards progress to `report` instead of drawing bars.

    huggingface_hub creates one bar for the file count and two for bytes; each one reports its
    own description and fraction. It may be called from download worker threads.
    """
    from tqdm.auto import tqdm  # type: ignore[import-untyped]  # tqdm ships no type information

    class _Reporter(tqdm):  # type: ignore[misc]  # subclassing the untyped tqdm (flagged by --strict)
        """A bar that is never drawn: every refresh becomes one LoadProgress."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            """huggingface_hub passes `name`, which tqdm itself does not accept."""
            kwargs.pop("name", None)
            kwargs["file"] = io.StringIO()  # never drawn: display() below reports instead
            super().__init__(*args, **kwargs)

        def display(self, msg: str | None = None, pos: int | None = None) -> bool:
            """tqdm's drawing hook, replaced: report what this bar measures and how far along."""
            total = self.total or 0
            fraction = min(1.0, self.n / total) if total else None
            what = self.desc or "downloading"
            if self.unit == "B" and total:
                what = f"{what} {self.n / 1e6:.1f} of {total / 1e6:.1f} MB"
            report(LoadProgress(f"{repo_id}: {what}", fraction))
            return True

    return _Reporter


def download_model(repo_id: str, report: Report, cache_dir: str | None = None) -> Path:
    """Fetch (or find in the local cache) an MLX model repo; every failure is one clear line."""
    from huggingface_hub import snapshot_download

    report(LoadProgress(f"looking for {repo_id} on Hugging Face"))
    try:
        folder = snapshot_download(
            repo_id, allow_patterns=list(ALLOW_PATTERNS), cache_dir=cache_dir,
            tqdm_class=progress_class(repo_id, report),
        )
    except Exception as error:  # every hub failure becomes one line for the user
        raise download_error(repo_id, error) from error
    return Path(folder)


def download_error(repo_id: str, error: Exception) -> ModelLoadError:
    """Map huggingface_hub's exceptions to what the user should do about them."""
    from huggingface_hub import constants, errors

    if isinstance(error, errors.GatedRepoError):
        return ModelLoadError(
            f"{repo_id} is gated: accept its terms on huggingface.co, then log in with `hf auth login`"
        )
    if isinstance(error, errors.RepositoryNotFoundError):
        return ModelLoadError(
            f"no model {repo_id} on Hugging Face and no local folder of that name "
            "(check the spelling; for a private repo log in with `hf auth login`)"
        )
    if isinstance(error, errors.RevisionNotFoundError):
        return ModelLoadError(f"{repo_id} has no such revision on Hugging Face")
    if isinstance(error, errors.IncompleteSnapshotError):
        return ModelLoadError(f"the cached copy of {repo_id} is incomplete and Hugging Face cannot be reached; "
                              "reconnect to finish the download, or pass a local folder")
    if isinstance(error, errors.LocalEntryNotFoundError):
        why = "offline mode is on (HF_HUB_OFFLINE)" if constants.HF_HUB_OFFLINE else "no network"
        return ModelLoadError(f"cannot download {repo_id}: {why} and it is not in the local cache; "
                              "download it once online or pass a local folder")
    if isinstance(error, errors.HFValidationError):
        return ModelLoadError(f"not a valid Hugging Face repo id: {repo_id}")
    return ModelLoadError(f"cannot download {repo_id}: {one_line(error)}")
