"""Model folders to loaded models: the happy path, every bad model as one clear line, and
tokenizers that ship only as a tiktoken file. (The hub and the picker's list: test_hub.py.)

Everything is offline: tiny models are built in tmp folders (the `tiny` fixture, in conftest.py).
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.models import hub
from engine.core.api import LoadProgress, ModelLoadError
from engine.models.load import DEFAULT_TIKTOKEN_PATTERN, load_model
from tinymodels import corpus

ROOT = Path(__file__).resolve().parent.parent


def _copy(source: Path, folder: Path) -> Path:
    shutil.copytree(source, folder)
    return folder


def _load_error(spec: str | Path, trust_remote_code: bool = False) -> str:
    with pytest.raises(ModelLoadError) as caught:
        load_model(str(spec), trust_remote_code=trust_remote_code, on_progress=None)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# ---------------------------------------------------------------------------------------------
# Loading a good model


def test_a_local_folder_loads_with_progress(tiny: Path) -> None:
    seen: list[LoadProgress] = []
    loaded = load_model(str(tiny), trust_remote_code=False, on_progress=seen.append)
    assert loaded.name == "tiny-chat" and loaded.path == tiny.resolve()
    assert loaded.config["model_type"] == "llama"
    assert type(loaded.tokenizer).__name__ == "TokenizerWrapper"
    ids = loaded.tokenizer.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=True)
    assert "hello" in loaded.tokenizer.decode(ids)
    assert seen[-1] == LoadProgress("loaded tiny-chat", 1.0)
    assert any("weights" in p.message for p in seen)


def test_demo_resolves_to_the_packaged_folder() -> None:
    path = hub.demo_model_path()
    assert path == ROOT / "engine" / "models" / "demo_model"
    if path.is_dir():
        assert hub.resolve_model("demo", lambda p: None) == (path, "demo")
    else:
        assert "demo model is missing" in _load_error("demo")


# ---------------------------------------------------------------------------------------------
# Bad models: one line each


def test_missing_path(tmp_path: Path) -> None:
    message = _load_error(tmp_path / "nope")
    assert message.startswith("model folder not found:") and "nope" in message


def test_empty_spec() -> None:
    assert "no model given" in _load_error("  ")


def test_folder_without_config(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    assert "is not a model folder (no config.json" in _load_error(tmp_path)


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    file = tmp_path / "model.gguf"
    file.write_bytes(b"GGUF")
    assert "is a file, not a model folder" in _load_error(file)


def test_pytorch_only_repo_is_not_mlx(tmp_path: Path, tiny: Path) -> None:
    folder = tmp_path / "torch"
    folder.mkdir()
    shutil.copy(tiny / "config.json", folder)
    (folder / "pytorch_model.bin").write_bytes(b"\0" * 64)
    assert "is not an MLX model" in _load_error(folder)
    (folder / "config.json").unlink()
    assert "is not an MLX model" in _load_error(folder)


def test_unsupported_architecture(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "odd")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "no_such_arch"}))
    assert "unsupported architecture 'no_such_arch'" in _load_error(folder)


def test_config_that_is_not_json(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "broken")
    (folder / "config.json").write_text("{ not json")
    assert "config.json is unreadable" in _load_error(folder)


def test_no_weights(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "empty")
    (folder / "model.safetensors").unlink()
    assert "has no weights (no model*.safetensors" in _load_error(folder)


def test_truncated_weights(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "cut")
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert "weight file model.safetensors is truncated or corrupt" in _load_error(folder)


def test_garbage_weights(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "garbage")
    (folder / "model.safetensors").write_bytes(b"\xff" * 100)
    assert "model.safetensors is corrupt (bad header)" in _load_error(folder)


def test_git_lfs_pointer_instead_of_weights(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "lfs")
    (folder / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\n")
    assert "Git LFS pointer" in _load_error(folder)


def test_missing_shard_named_by_the_index(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "sharded")
    index = {"weight_map": {"a": "model.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "missing weight file model-00002-of-00002.safetensors" in _load_error(folder)


def test_weights_that_do_not_fit_the_config(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "mismatch")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 64}))
    message = _load_error(folder)
    assert message.startswith("cannot load mismatch:") and "shape" in message.lower()


def test_no_tokenizer(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "notok")
    (folder / "tokenizer.json").unlink()
    assert "has no tokenizer" in _load_error(folder)


def test_model_code_needs_trust_and_never_runs_without_it(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "custom")
    marker = tmp_path / "ran"
    (folder / "my_model.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_file": "my_model.py"}))
    assert "--trust-remote-code" in _load_error(folder)
    assert not marker.exists()


def test_tokenizer_code_needs_trust_and_never_runs_without_it(tmp_path: Path, tiny: Path) -> None:
    folder = _copy(tiny, tmp_path / "customtok")
    marker = tmp_path / "ran"
    (folder / "tokenization_custom.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    auto_map = {"AutoTokenizer": ["tokenization_custom.CustomTokenizer", None]}
    config.update(tokenizer_class="CustomTokenizer", auto_map=auto_map)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    message = _load_error(folder)
    assert "tokenizer runs its own Python code" in message and "--trust-remote-code" in message
    assert not marker.exists()


def test_supported_model_types_are_read_without_mlx() -> None:
    assert hub.is_supported_model_type("llama")
    assert hub.is_supported_model_type("mistral")  # remapped to llama by mlx-lm
    assert not hub.is_supported_model_type("no_such_arch")


# ---------------------------------------------------------------------------------------------
# tiktoken tokenizers


CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" \
         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
SAMPLES = ["hello world, how are you today?", "你好 世界 café naïve 😀🚀", "  spaces\n\nand\tlines 12345 ", "It's"]


@pytest.fixture(scope="module")
def tiktoken_ranks() -> dict[bytes, int]:
    from tiktoken._educational import bpe_train

    return bpe_train(" ".join(corpus(200)), 300, DEFAULT_TIKTOKEN_PATTERN, visualise=None)


def _tiktoken_model(
    folder: Path, tiny: Path, ranks: dict[bytes, int], file_name: str, extra: dict[str, Any] | None = None
) -> Path:
    """The tiny model's weights with a tokenizer that exists only as a tiktoken file."""
    folder.mkdir()
    config = json.loads((tiny / "config.json").read_text())
    vocab = len(ranks) + 2
    config.update(vocab_size=vocab, eos_token_id=len(ranks) + 1)
    _resized_weights(tiny, folder, config)
    by_rank = sorted(ranks.items(), key=lambda item: item[1])
    lines = [f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in by_rank]
    (folder / file_name).write_text("".join(lines))
    specials = {str(len(ranks)): {"content": "<|im_start|>", "special": True},
                str(len(ranks) + 1): {"content": "<|im_end|>", "special": True}}
    tokenizer_config = {"tokenizer_class": "TikTokenTokenizer", "added_tokens_decoder": specials,
                        "eos_token": "<|im_end|>", "chat_template": CHATML, **(extra or {})}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return folder


def _resized_weights(tiny: Path, folder: Path, config: dict) -> None:
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models.llama import Model, ModelArgs

    model = Model(ModelArgs.from_dict(config))
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("file_name", ["tiktoken.model", "tiny.tiktoken", "tokenizer.model"])
def test_a_tiktoken_tokenizer_matches_tiktoken(
    tmp_path: Path, tiny: Path, tiktoken_ranks: dict[bytes, int], file_name: str
) -> None:
    import tiktoken

    folder = _tiktoken_model(tmp_path / "tk", tiny, tiktoken_ranks, file_name)
    loaded = load_model(str(folder), trust_remote_code=False, on_progress=None)
    n = len(tiktoken_ranks)
    reference = tiktoken.Encoding("ref", pat_str=DEFAULT_TIKTOKEN_PATTERN, mergeable_ranks=tiktoken_ranks,
                                  special_tokens={"<|im_start|>": n, "<|im_end|>": n + 1})
    tokenizer = loaded.tokenizer
    for text in SAMPLES:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert ids == reference.encode(text)
        assert tokenizer.decode(ids) == text
    assert tokenizer.eos_token_ids == {n + 1}
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert prompt[0] == n
    assert reference.decode(prompt, errors="strict") == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_a_tiktoken_tokenizer_streams_text(tmp_path: Path, tiny: Path, tiktoken_ranks: dict[bytes, int]) -> None:
    folder = _tiktoken_model(tmp_path / "tk", tiny, tiktoken_ranks, "tiktoken.model")
    tokenizer = load_model(str(folder), trust_remote_code=False, on_progress=None).tokenizer
    detokenizer = tokenizer.detokenizer
    detokenizer.reset()
    for token in tokenizer.encode(SAMPLES[1], add_special_tokens=False):
        detokenizer.add_token(token)
    detokenizer.finalize()
    assert detokenizer.text == SAMPLES[1]


def test_tiktoken_repo_code_is_not_needed_or_run(tmp_path: Path, tiny: Path, tiktoken_ranks: dict[bytes, int]) -> None:
    marker = tmp_path / "ran"
    auto_map = {"auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]}}
    folder = _tiktoken_model(tmp_path / "kimi", tiny, tiktoken_ranks, "tiktoken.model", auto_map)
    (folder / "tokenization_kimi.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    loaded = load_model(str(folder), trust_remote_code=False, on_progress=None)
    assert loaded.tokenizer.encode("hello", add_special_tokens=False)
    assert not marker.exists()


def test_a_corrupt_tiktoken_file(tmp_path: Path, tiny: Path, tiktoken_ranks: dict[bytes, int]) -> None:
    folder = _tiktoken_model(tmp_path / "bad", tiny, tiktoken_ranks, "tiktoken.model")
    with open(folder / "tiktoken.model", "a") as f:
        f.write("!!!not-base64 7\n")
    assert "tiktoken.model is not a valid tiktoken file (line 301)" in _load_error(folder)
