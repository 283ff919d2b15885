"""Turn a model spec ("demo", a folder, a hub repo id) into a loaded model and tokenizer.

Runs on the engine thread (it imports MLX). `engine.models.hub` first finds the folder and checks it
without MLX, so the common mistakes get a precise one-line message; whatever mlx-lm or
transformers still refuse is wrapped into the same single line (`ModelLoadError`).

Tokenizers that ship only as a tiktoken BPE file (``tiktoken.model``, ``*.tiktoken`` or a
tiktoken-format ``tokenizer.model``, as some Kimi, Qwen and InternLM releases do) usually come
with Python tokenizer code in the repo. Rather than run that code, we build an ordinary fast
tokenizer from the file and check it against tiktoken itself on a probe text, so the ids the
model sees are exactly what tiktoken produces.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine.core.api import LoadProgress, ModelLoadError
from engine.core.regular import open_regular, read_regular_bytes, read_regular_text
from engine.models.hub import check_model_folder, one_line, resolve_model

# The GPT-4 (cl100k) split pattern; transformers' TikTokenConverter uses the same default.
DEFAULT_TIKTOKEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_GLOB_MAGIC = re.compile(r"[*?\[]")  # what glob.glob reads as a pattern (glob.has_magic's set)
_PROBE = "Hello, world! It's 2024: naïve café, 你好世界, こんにちは 🙂🚀\n\tdef f(x):  return x**2 \r\n"


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for the engine: the MLX module, mlx-lm's TokenizerWrapper, and where it came from."""

    model: Any  # mlx.nn.Module
    tokenizer: Any  # mlx_lm.tokenizer_utils.TokenizerWrapper
    path: Path
    name: str
    config: dict[str, Any]


def _ignore(progress: LoadProgress) -> None:
    """The default progress callback."""


def load_model(
    spec: str, *, trust_remote_code: bool, on_progress: Callable[[LoadProgress], None] | None
) -> LoadedModel:
    """Resolve, check and load `spec`. Raises `ModelLoadError` with one line for the user."""
    report = on_progress or _ignore
    path, name = resolve_model(spec, report)
    check_model_folder(path, name, trust_remote_code=trust_remote_code)
    report(LoadProgress(f"loading {name}: weights"))
    model, config = _load_weights(path, name, trust_remote_code)
    report(LoadProgress(f"loading {name}: tokenizer"))
    tokenizer = load_tokenizer(path, name, config, trust_remote_code=trust_remote_code)
    report(LoadProgress(f"loaded {name}", 1.0))
    return LoadedModel(model, tokenizer, path, name, config)


def _load_weights(path: Path, name: str, trust_remote_code: bool) -> tuple[Any, dict[str, Any]]:
    """mlx-lm's own loader (quantization, sanitising, remapping), with its errors made one line,
    and the RoPE settings a config keeps where mlx-lm does not look mapped first (`rope_fields`)."""
    from mlx_lm.utils import load_model as mlx_load_model

    mapped = rope_fields(path, name)
    try:
        with literal_folder(path) as folder:
            return mlx_load_model(folder, lazy=False, model_config=mapped or None, trust_remote_code=trust_remote_code)
    except Exception as error:  # shape mismatches, missing tensors, bad quantization, ...
        raise ModelLoadError(f"cannot load {name}: {one_line(error)}") from error


@contextmanager
def literal_folder(path: Path) -> Iterator[Path]:
    """`path`, or, while its name holds glob characters (``*?[``), a link to it whose name does not.

    mlx-lm finds the weights with ``glob.glob(str(folder / "model*.safetensors"))``, which reads
    a folder named ``run[ab]`` as a pattern too: such a folder had "No safetensors". mlx-lm
    cannot be told to escape it, so it is given a plain name for the same folder: a symlink in
    a private temporary folder, removed after the load.
    """
    if not _GLOB_MAGIC.search(str(path)):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="logitscope-model-") as scratch:
        link = Path(scratch) / "model"
        link.symlink_to(path.resolve(), target_is_directory=True)
        yield link if not _GLOB_MAGIC.search(str(link)) else path


def rope_fields(path: Path, name: str) -> dict[str, Any]:
    """The config keys that put ``rope_parameters`` (transformers 5) where mlx-lm's model reads
    them (`engine.models.ropeconfig`); one line when they cannot be mapped. {} when the config
    needs nothing, or mlx-lm has no model for it (its own load then says so)."""
    import dataclasses

    from mlx_lm.utils import _get_classes, load_config

    from engine.models.ropeconfig import overrides

    try:
        config = load_config(path)
        _, args_class = _get_classes(config)
    except Exception:  # noqa: BLE001 - an unknown family or a bad config: mlx-lm's load reports it
        return {}
    fields = {f.name for f in dataclasses.fields(args_class)} if dataclasses.is_dataclass(args_class) else set()
    return overrides(config, fields, name)


def load_tokenizer(path: Path, name: str, config: dict[str, Any], *, trust_remote_code: bool) -> Any:
    """A TokenizerWrapper: built from a tiktoken file when that is all there is, else mlx-lm's."""
    from mlx_lm.utils import load_tokenizer as mlx_load_tokenizer

    eos = config.get("eos_token_id")
    tiktoken_file = find_tiktoken_file(path)
    remote_tokenizer = trust_remote_code and "auto_map" in _tokenizer_config(path, name)
    if tiktoken_file is not None and not (path / "tokenizer.json").is_file() and not remote_tokenizer:
        return tiktoken_tokenizer(path, tiktoken_file, name, eos_token_ids=eos)
    extra = {"trust_remote_code": True} if trust_remote_code else None
    try:
        return mlx_load_tokenizer(path, extra, eos_token_ids=eos)
    except ValueError as error:
        if "trust_remote_code" in str(error):
            raise ModelLoadError(
                f"{name}'s tokenizer runs its own Python code; allow it with --trust-remote-code "
                "(trust_remote_code = true) only if you trust its author"
            ) from error
        raise ModelLoadError(f"cannot load {name}'s tokenizer: {one_line(error)}") from error
    except Exception as error:
        raise ModelLoadError(f"cannot load {name}'s tokenizer: {one_line(error)}") from error


# ---------------------------------------------------------------------------------------------
# tiktoken BPE files


def _is_tiktoken_file(file: Path) -> bool:
    """A tiktoken BPE file is text lines of ``<base64 token> <rank>`` (a SentencePiece one is protobuf)."""
    try:
        with open_regular(file) as f:
            first = f.readline(4096).split()
        return len(first) == 2 and first[1].isdigit() and bool(base64.b64decode(first[0], validate=True))
    except (OSError, ValueError, binascii.Error):
        return False


def find_tiktoken_file(folder: Path) -> Path | None:
    """The folder's tiktoken BPE file, if it has one."""
    candidates = [folder / "tiktoken.model", *sorted(folder.glob("*.tiktoken")), folder / "tokenizer.model"]
    return next((c for c in candidates if c.is_file() and _is_tiktoken_file(c)), None)


def read_tiktoken_ranks(file: Path, name: str) -> dict[bytes, int]:
    """Parse the BPE ranks ourselves: tiktoken's loader caches by path in /tmp, which would serve
    a stale vocabulary if the file at that path changed."""
    ranks: dict[bytes, int] = {}
    try:
        lines = read_regular_bytes(file).splitlines()
    except OSError as error:
        raise ModelLoadError(f"{name}: cannot read {file.name} ({one_line(error)})") from error
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as error:
            raise ModelLoadError(f"{name}: {file.name} is not a valid tiktoken file (line {number})") from error
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ModelLoadError(f"{name}: {file.name} is not a valid tiktoken file (ranks are not 0..n-1)")
    return ranks


def _special_tokens(tokenizer_config: dict[str, Any], base: int) -> dict[str, int]:
    """Special tokens (ids from `base` up) from tokenizer_config.json's added_tokens_decoder."""
    decoder = tokenizer_config.get("added_tokens_decoder") or {}
    specials: dict[str, int] = {}
    for key, token in decoder.items():
        content = token.get("content") if isinstance(token, dict) else token
        if isinstance(content, str) and str(key).isdigit() and int(key) >= base:
            specials[content] = int(key)
    return specials


def _token_text(value: Any) -> str | None:
    """bos/eos in tokenizer_config.json are a string or an AddedToken dict."""
    return value.get("content") if isinstance(value, dict) else value if isinstance(value, str) else None


def tiktoken_tokenizer(folder: Path, file: Path, name: str, *, eos_token_ids: Any = None) -> Any:
    """A fast tokenizer equivalent to the tiktoken encoding in `file`, checked against tiktoken."""
    import tiktoken
    from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, TokenizerWrapper
    from transformers import PreTrainedTokenizerFast

    config = _tokenizer_config(folder, name)
    ranks = read_tiktoken_ranks(file, name)
    specials = _special_tokens(config, len(ranks))
    pattern = config.get("pat_str") or config.get("pattern") or DEFAULT_TIKTOKEN_PATTERN
    try:
        reference = tiktoken.Encoding(file.stem, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    except ValueError as error:
        raise ModelLoadError(f"{name}: {file.name} is not a usable tiktoken file ({one_line(error)})") from error
    backend = _converted(ranks, specials, pattern)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=_token_text(config.get("bos_token")),
        eos_token=_token_text(config.get("eos_token")),
        chat_template=_chat_template(folder, config),
    )
    if fast.encode(_PROBE, add_special_tokens=False) != reference.encode(_PROBE, disallowed_special=()):
        raise ModelLoadError(f"{name}: the tokenizer built from {file.name} disagrees with tiktoken; it cannot be used")
    return TokenizerWrapper(fast, BPEStreamingDetokenizer, eos_token_ids=_as_list(eos_token_ids))


def _as_list(value: Any) -> list[int] | None:
    """config.json's eos_token_id is an int or a list; TokenizerWrapper wants a list (or None)."""
    return [value] if isinstance(value, int) else list(value) if isinstance(value, (list, tuple)) else None


def _converted(ranks: dict[bytes, int], specials: dict[str, int], pattern: str) -> Any:
    """A `tokenizers.Tokenizer` with the same byte-level BPE; specials fill the ids after the ranks."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    class _FromRanks(TikTokenConverter):
        """The converter reads ranks from a URL; ours are already parsed (and checked)."""

        @staticmethod
        def load_tiktoken_bpe(tiktoken_url: str) -> dict[bytes, int]:
            """Ignores the URL: the ranks come from the file `read_tiktoken_ranks` parsed."""
            return ranks

    by_id = {token_id: text for text, token_id in specials.items()}
    extra = [by_id.get(i, f"<|reserved_token_{i}|>") for i in range(len(ranks), max(by_id, default=len(ranks) - 1) + 1)]
    return _FromRanks(vocab_file="", pattern=pattern, extra_special_tokens=extra).converted()


def _tokenizer_config(folder: Path, name: str) -> dict[str, Any]:
    """tokenizer_config.json as a dict ({} when absent: many tiktoken repos have none)."""
    file = folder / "tokenizer_config.json"
    if not file.is_file():
        return {}
    try:
        data = json.loads(read_regular_text(file))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{name}: tokenizer_config.json is unreadable ({one_line(error)})") from error
    return data if isinstance(data, dict) else {}


def _chat_template(folder: Path, config: dict[str, Any]) -> str | None:
    """The chat template: a chat_template.jinja file wins over tokenizer_config.json (as in transformers)."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return read_regular_text(jinja)
    template = config.get("chat_template")
    return template if isinstance(template, str) else None
