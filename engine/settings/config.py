"""logitscope's settings: the packaged defaults, the user's overrides, and saving them back.

Textual-free on purpose: the headless CLI and the TUI both read settings through here.

Two files are involved:

- the packaged ``config.toml`` (every setting with its default and a comment). In a wheel it sits
  at ``engine/config.toml``; in a checkout or editable install it is at the repository root, next
  to ``engine/``.
- the user's file, ``$XDG_CONFIG_HOME/logitscope/config.toml`` (``~/.config/...`` by default) or
  the one given with ``--config PATH``. It overrides the defaults key by key.

Loading never raises on a bad user file: every problem (TOML syntax, unknown key, wrong type,
out-of-range value) becomes one line naming the file, line and key, the bad key is ignored and
everything else is kept. Key-level checks reuse the sampling limits in `engine.api`, so the
config, the CLI and the TUI refuse exactly the same values.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from engine.api import PARAM_LIMITS, ParamError, SamplingParams
from engine.settings.paths import cache_dir, state_dir, user_config_dir
from engine.settings.files import (
    ConfigError,
    KeyLines,
    Problems,
    TomlProblem,
    format_location,
    read_toml,
    write_toml_atomically,
)

__all__ = [
    "ChatConfig",
    "Config",
    "ConfigError",
    "LoadedConfig",
    "ModelConfig",
    "UIConfig",
    "default_config_path",
    "format_location",
    "load_config",
    "save_settings",
    "cache_dir",
    "state_dir",
    "user_config_dir",
    "user_config_path",
]

COMPUTE_DTYPES = ("auto", "float32", "bfloat16", "float16", "model")


@dataclass(frozen=True)
class ModelConfig:
    """[model]: which model to open and how to run it."""

    default: str = "demo"  # a local folder, a Hugging Face repo id, or "demo"
    trust_remote_code: bool = False  # allow model code from the repo; never on by default
    max_context: int = 0  # stop a conversation at this many tokens (0 = the model's limit)
    compute_dtype: str = "auto"  # one of COMPUTE_DTYPES; "auto" = fastest on this machine
    fast_blas: bool = True  # load OpenBLAS into MLX on Linux CPUs
    fast_layers: bool = True  # CPU fast paths: prompt attention, SwiGLU, RoPE, RMSNorm (engine.cpu.routing)


@dataclass(frozen=True)
class UIConfig:
    """[ui]: how the TUI looks when it starts."""

    theme: str = "logitscope-dark"  # a built-in theme or one from the config folder's themes/
    heatmap: bool = False  # colour every token by its probability
    low_prob_threshold: float = 0.1  # "jump to next low-probability token" stops below this
    show_candidates: bool = True  # the candidates panel beside the chat
    show_params: bool = True  # the parameters panel


@dataclass(frozen=True)
class EngineConfig:
    """[engine]: where the model runs. Empty `server` = here, with MLX; a URL = an
    OpenAI-compatible server (mlx_lm.server, vLLM, llama.cpp: `engine.remote`)."""

    server: str = ""  # e.g. "http://127.0.0.1:8080"; --server overrides it
    # The *name* of the environment variable holding the server's API key (never the key itself,
    # so a config file can be shared); an empty name or an unset variable sends no key.
    api_key_env: str = "LOGITSCOPE_API_KEY"
    timeout_s: float = 60.0  # the longest silence tolerated from the server
    # The model's tokenizer (a folder or hub id) for servers that take token-id prompts (vLLM,
    # llama.cpp); empty = the model's name. --tokenizer overrides it.
    tokenizer: str = ""


CONTEXT_STRATEGIES = ("drop_oldest", "refuse")


@dataclass(frozen=True)
class ChatConfig:
    """[chat]: how a conversation behaves when it outgrows the model's context."""

    # "drop_oldest": leave the oldest exchanges out of what the model reads (never the system
    # prompt, never the new message; the status bar says so); "refuse": send nothing that does
    # not fit. Either way a message too long on its own is refused and stays in the input.
    context_strategy: str = "drop_oldest"


PREVIEW_SAMPLING = ("greedy", "current")


@dataclass(frozen=True)
class PreviewConfig:
    """[preview]: what-if previews, the next tokens each top candidate would lead to (`run --preview`
    and the candidates panel)."""

    candidates: int = 3  # how many of the top candidates get a preview; 0 = no previews
    tokens: int = 12  # how long each preview is
    sampling: str = "greedy"  # "greedy", or "current": the current sampling parameters with `seed`
    seed: int = 0  # the fixed seed of "current" previews (so a preview is what its branch writes)
    delay_ms: int = 300  # how long the token cursor rests before previews are computed

    def params(self, current: SamplingParams) -> SamplingParams:
        """What previews sample with: `current` at temperature 0 ("greedy": the model's favourite
        at each step, penalties kept) or as is ("current", drawn with `seed`); no candidates, a
        preview shows only its tokens."""
        greedy = {"temperature": 0.0} if self.sampling == "greedy" else {}
        return current.with_changes(candidates=0, seed=self.seed, max_tokens=self.tokens, **greedy)


Preset = dict[str, "int | float | None"]


@dataclass(frozen=True)
class Config:
    """Every setting, typed. `presets` map a name to a partial set of `SamplingParams` fields
    (apply one with ``params.with_changes(**preset)``); `keys` map binding ids to key strings
    (validated against the TUI's bindings by `tui.keymap`)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    presets: dict[str, Preset] = field(default_factory=dict)
    ui: UIConfig = field(default_factory=UIConfig)
    keys: dict[str, str] = field(default_factory=dict)
    chat: ChatConfig = field(default_factory=ChatConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    preview: PreviewConfig = field(default_factory=PreviewConfig)


@dataclass(frozen=True)
class LoadedConfig:
    """The result of `load_config`: the settings, what was wrong, and where they came from.

    `user_path` is where "Save settings" writes, whether or not the file exists yet.
    """

    config: Config
    problems: tuple[str, ...]
    user_path: Path
    default_path: Path | None


# ---------------------------------------------------------------------------------------------
# Where the files are


def default_config_path() -> Path | None:
    """The packaged defaults: ``engine/config.toml`` in a wheel, the repo root in a checkout."""
    engine = Path(__file__).resolve().parent.parent
    for candidate in (engine / "config.toml", engine.parent / "config.toml"):
        if candidate.is_file():
            return candidate
    return None


def user_config_path(override: str | os.PathLike[str] | None = None,
                     env: Mapping[str, str] | None = None) -> Path:
    """The user's config file: ``--config PATH`` when given (``~`` expanded), else the XDG one."""
    if override is not None and str(override) != "":
        return Path(override).expanduser()
    return user_config_dir(env) / "config.toml"


# ---------------------------------------------------------------------------------------------
# Checking one value


def _type_problem(value: object, expected: object) -> str | None:
    """A one-line complaint if `value` is not of the TOML type the default `expected` has."""
    if isinstance(expected, bool):
        ok, name = isinstance(value, bool), "true or false"
    elif isinstance(expected, int):
        ok, name = isinstance(value, int) and not isinstance(value, bool), "a whole number"
    elif isinstance(expected, float):
        ok, name = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    else:
        ok, name = isinstance(value, str), "a string"
    return None if ok else f"must be {name}, got {value!r}"


def _coerce(value: Any, expected: object) -> Any:
    """TOML ``1`` where a float is expected becomes ``1.0``, so the dataclass holds one type."""
    if isinstance(expected, float) and isinstance(value, int):
        return float(value)
    return value


def _check_range(low: float, high: float) -> Callable[[Any], str | None]:
    """A check for a number that is the right type but may be out of range."""
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}, got {v!r}"


def _check_choice(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    """A check for a string that must be one of a few words; the message lists them all."""
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}; got {v!r}"


def _check_not_empty(value: Any) -> str | None:
    """Strings where blank would mean "nothing" (a model, a theme) rather than a default."""
    return None if value.strip() else "must not be empty"


# Settings that were renamed: the old name gets a message naming the new one.
_RENAMED: Mapping[str, Mapping[str, str]] = {"model": {"fast_prefill": "fast_layers"}}

# Checks beyond the type, per section and key (the type comes from the dataclass default).
_EXTRA_CHECKS: Mapping[str, Mapping[str, Callable[[Any], str | None]]] = {
    "model": {
        "default": _check_not_empty,
        "max_context": _check_range(0, 10_000_000),
        "compute_dtype": _check_choice(COMPUTE_DTYPES),
    },
    "ui": {
        "theme": _check_not_empty,
        "low_prob_threshold": _check_range(0.0, 1.0),
    },
    "chat": {"context_strategy": _check_choice(CONTEXT_STRATEGIES)},
    "engine": {"timeout_s": _check_range(1.0, 3600.0)},
    "preview": {
        "candidates": _check_range(0, 16),
        "tokens": _check_range(1, 256),
        "sampling": _check_choice(PREVIEW_SAMPLING),
        "seed": _check_range(0, 2**63 - 1),
        "delay_ms": _check_range(0, 10_000),
    },
}


def _sampling_value(name: str, value: Any) -> Any:
    """One [sampling] or preset value checked by `SamplingParams` itself; raises ParamError."""
    if name == "seed" and isinstance(value, int) and not isinstance(value, bool) and value == -1:
        return None
    try:
        SamplingParams().with_changes(**{name: value})  # the one place the limits live
    except OverflowError:  # api.py's isfinite() on a huge TOML integer
        low, high, _ = PARAM_LIMITS[name]
        raise ParamError(f"{name} must be between {low} and {high}, got {value!r}") from None
    if PARAM_LIMITS[name][2] is float and isinstance(value, int):
        return float(value)  # TOML `1` where a float belongs: keep one type in the dataclass
    return value


# ---------------------------------------------------------------------------------------------
# Merging a parsed file into the settings


@dataclass
class _Merge:
    """One file being merged: its path and text (to locate keys) and the problems so far
    (the first twenty listed, the rest counted; the file is scanned for lines once)."""

    path: Path
    text: str
    problems: Problems = field(init=False)
    _lines: KeyLines | None = None

    def __post_init__(self) -> None:
        self.problems = Problems(self.path)

    def problem(self, table: tuple[str, ...], key: str | None, message: str) -> None:
        """Record one bad key as ``file:line: [table] key: message; ignored``."""
        if self.problems.full:
            self.problems.add("")  # counted only: nobody reads the 4,000th line
            return
        if len(message) > 160:  # a pasted megabyte stays one readable line
            message = message[:157] + "..."
        if self._lines is None:
            self._lines = KeyLines(self.text)
        where = self._lines.location(self.path, table, key)
        label = ".".join(table) + (f"] {key}" if key is not None else "]")
        self.problems.add(f"{where}: [{label}: {message}; ignored")


def _merge_dataclass(merge: _Merge, section: str, current: Any, raw: Mapping[str, Any]) -> Any:
    """One plain section ([model], [ui]) overridden key by key; bad keys are reported, skipped."""
    changes: dict[str, Any] = {}
    known = {f.name for f in fields(current)}
    for key, value in raw.items():
        renamed = _RENAMED.get(section, {}).get(key)
        if renamed is not None:
            merge.problem((section,), key, f"renamed: call it {renamed} (this value was not used)")
            continue
        if key not in known:
            merge.problem((section,), key, "unknown setting")
            continue
        expected = getattr(current, key)
        message = _type_problem(value, expected)
        check = _EXTRA_CHECKS.get(section, {}).get(key)
        if message is None and check is not None:
            message = check(value)
        if message is not None:
            merge.problem((section,), key, message)
            continue
        changes[key] = _coerce(value, expected)
    return replace(current, **changes)


def _merge_sampling_table(merge: _Merge, table: tuple[str, ...], raw: Mapping[str, Any]) -> dict[str, Any]:
    """The valid values of a [sampling] or [presets.NAME] table; the rest reported."""
    good: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in PARAM_LIMITS:
            merge.problem(table, key, "unknown sampling parameter")
            continue
        try:
            good[key] = _sampling_value(key, value)
        except ParamError as exc:
            merge.problem(table, key, str(exc).removeprefix(f"{key} "))
    return good


def _merge_presets(merge: _Merge, current: dict[str, Preset], raw: Mapping[str, Any]) -> dict[str, Preset]:
    """Presets merge per preset and per key: a user's [presets.balanced] top_p keeps the rest."""
    merged = {name: dict(values) for name, values in current.items()}
    for name, values in raw.items():
        if not isinstance(values, dict):
            merge.problem(("presets",), name, f"must be a table of sampling values, got {values!r}")
            continue
        merged.setdefault(name, {}).update(_merge_sampling_table(merge, ("presets", name), values))
    return merged


def _flatten_keys(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Unquoted ``param.temperature.up = "x"`` is a nested table in TOML; treat it as the id."""
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            flat.update(_flatten_keys(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _merge_keys(merge: _Merge, current: dict[str, str], raw: Mapping[str, Any]) -> dict[str, str]:
    """[keys]: binding id -> key string. Only the type is checked here; whether the id and the
    key exist is `tui.keymap`'s business (the engine does not know the TUI's bindings)."""
    merged = dict(current)
    for binding_id, value in _flatten_keys(raw).items():
        if isinstance(value, str):
            merged[binding_id] = value
        else:
            merge.problem(("keys",), binding_id, f'must be a key string like "ctrl+up", got {value!r}')
    return merged


def _merge_file(merge: _Merge, config: Config, data: Mapping[str, Any]) -> Config:
    """Apply one parsed file on top of `config`, section by section."""
    parts: dict[str, Any] = {f.name: getattr(config, f.name) for f in fields(config)}
    for section, raw in data.items():
        if section not in parts:
            merge.problem((section,), None, "unknown section")
        elif not isinstance(raw, dict):
            merge.problem((section,), None, f"must be a table, got {raw!r}")
        elif section in ("model", "ui", "chat", "engine", "preview"):
            parts[section] = _merge_dataclass(merge, section, parts[section], raw)
        elif section == "sampling":
            parts[section] = parts[section].with_changes(**_merge_sampling_table(merge, ("sampling",), raw))
        elif section == "presets":
            parts[section] = _merge_presets(merge, parts[section], raw)
        else:
            parts[section] = _merge_keys(merge, parts[section], raw)
    return Config(**parts)


def _apply_file(config: Config, path: Path, problems: list[str], *, required: bool) -> Config:
    """Read, parse and merge one file; any problem is appended and the rest of the file kept."""
    result = read_toml(path)
    if isinstance(result, TomlProblem):
        if result.missing and not required:
            return config
        problems.append(f"{result.message}; using the defaults instead of this file")
        return config
    data, text = result
    merge = _Merge(path, text)
    merged = _merge_file(merge, config, data)
    problems.extend(merge.problems.listed())
    return merged


def load_config(user_path: Path | None = None, *, explicit: bool = False, user_file: bool = True) -> LoadedConfig:
    """The packaged defaults overridden by the user's file. Never raises on a bad file.

    `user_path` None means the XDG location. With `explicit` (the user named the file with
    ``--config``), a missing file is reported; otherwise a missing user file is normal. Without
    `user_file` (``run --no-config``) the user's file is not read: the packaged defaults only.
    """
    problems: list[str] = []
    path = user_path if user_path is not None else user_config_path()
    config = Config()
    default_path = default_config_path()
    if default_path is None:
        problems.append("the packaged config.toml is missing; using built-in defaults")
    else:
        config = _apply_file(config, default_path, problems, required=True)
    if user_file:
        config = _apply_file(config, path, problems, required=explicit)
    return LoadedConfig(config, tuple(problems), path, default_path)


# ---------------------------------------------------------------------------------------------
# Saving


def _sampling_table(params: SamplingParams) -> dict[str, int | float]:
    """`SamplingParams` as the [sampling] table says it (a fresh seed per turn is -1)."""
    table: dict[str, int | float] = {}
    for f in fields(params):
        value = getattr(params, f.name)
        table[f.name] = -1 if value is None else value
    return table


def save_settings(params: SamplingParams, theme: str, path: Path) -> None:
    """Write `params` to [sampling] and `theme` to [ui].theme of the user's file, keeping
    every other setting in it. Raises `ConfigError` (one line) and leaves the file untouched.

    The write is atomic (a temporary file in the same folder, then ``os.replace``), so a crash
    never leaves half a file. A file that does not parse is NOT overwritten: we refuse and say
    where it is broken, because rewriting it would silently drop everything we could not read.
    Comments in the user's file are not kept (TOML writers do not round-trip them).
    """
    result = read_toml(path)
    if isinstance(result, TomlProblem) and not result.missing:
        raise ConfigError(f"not saving: {result.message}; fix or move that file, then save again")
    data: dict[str, Any] = {} if isinstance(result, TomlProblem) else dict(result[0])
    sampling = data.get("sampling")
    data["sampling"] = {**(sampling if isinstance(sampling, dict) else {}), **_sampling_table(params)}
    ui = data.get("ui")
    data["ui"] = {**(ui if isinstance(ui, dict) else {}), "theme": theme}
    write_toml_atomically(path, data)

