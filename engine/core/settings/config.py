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
everything else is kept. Key-level checks reuse the sampling limits in `engine.core.api`, so the
config, the CLI and the TUI refuse exactly the same values.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from engine.core.api import PARAM_LIMITS, ParamError, SamplingParams
from engine.core.forks import ENTROPY_LIMIT
from engine.core.params import order_name
from engine.core.settings.paths import cache_dir, state_dir, user_config_dir
from engine.core.settings.sections import (
    COMPUTE_DTYPES,
    CONTEXT_STRATEGIES,
    GGUF_THREADS_LIMIT,
    PREVIEW_SAMPLING,
    ChatConfig,
    Config,
    LoadedConfig,
    ModelConfig,
    Preset,
    UIConfig,
)
from engine.core.settings.files import (
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

# ---------------------------------------------------------------------------------------------
# Where the files are


def default_config_path() -> Path | None:
    """The packaged defaults: ``engine/config.toml`` in a wheel, the repo root in a checkout."""
    engine = Path(__file__).resolve().parents[2]
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
        "gguf_threads": _check_range(0, GGUF_THREADS_LIMIT),
    },
    "ui": {
        "theme": _check_not_empty,
        "low_prob_threshold": _check_range(0.0, 1.0),
        "fork_entropy": _check_range(0.0, ENTROPY_LIMIT),
        "fork_margin": _check_range(0.0, 1.0),
    },
    "chat": {"context_strategy": _check_choice(CONTEXT_STRATEGIES)},
    "engine": {"timeout_s": _check_range(1.0, 3600.0), "turn_timeout_s": _check_range(1.0, 86400.0)},
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
    key exist is `tui.app.keymap`'s business (the engine does not know the TUI's bindings)."""
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


def _sampling_table(params: SamplingParams) -> dict[str, Any]:
    """`SamplingParams` as the [sampling] table says it (a fresh seed per turn is -1, lists as
    arrays, the chain's order by its preset's name where it has one)."""
    table: dict[str, Any] = {}
    for f in fields(params):
        value = getattr(params, f.name)
        if f.name == "samplers":
            value = order_name(value)
        elif isinstance(value, tuple):
            value = [list(item) if isinstance(item, tuple) else item for item in value]
        table[f.name] = -1 if value is None else value
    return table


def save_settings(params: SamplingParams, theme: str, path: Path, ui: Mapping[str, Any] | None = None) -> None:
    """Write `params` to [sampling], `theme` to [ui].theme and `ui`'s other values (the fork
    thresholds) to [ui] of the user's file, keeping every other setting in it. Raises
    `ConfigError` (one line) and leaves the file untouched.

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
    old_ui = data.get("ui")
    data["ui"] = {**(old_ui if isinstance(old_ui, dict) else {}), **(ui or {}), "theme": theme}
    write_toml_atomically(path, data)

