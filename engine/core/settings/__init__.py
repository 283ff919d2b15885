"""The user's settings: `config.toml` as typed objects (`config`), the TOML files behind them with
their one-line problems (`files`), and where logitscope keeps its files (`paths`).

The names below are the package's public surface; the TUI uses only these.
"""

from engine.core.settings.config import default_config_path, load_config, save_settings, user_config_path
from engine.core.settings.files import (
    MAX_PROBLEMS,
    ConfigError,
    KeyLines,
    Problems,
    TomlProblem,
    display_path,
    format_location,
    parse_toml,
    read_toml,
    write_toml_atomically,
)
from engine.core.settings.sections import (
    COMPUTE_DTYPES,
    GGUF_THREADS_LIMIT,
    ChatConfig,
    Config,
    EngineConfig,
    LoadedConfig,
    ModelConfig,
    PreviewConfig,
    UIConfig,
    parse_gguf_threads,
)
from engine.core.settings.paths import cache_dir, data_dir, kv_cache_dir, state_dir, user_config_dir
from engine.core.text import printable, printable_json, shortened

__all__ = [
    "COMPUTE_DTYPES",
    "GGUF_THREADS_LIMIT",
    "ChatConfig",
    "EngineConfig",
    "MAX_PROBLEMS",
    "Config",
    "ConfigError",
    "KeyLines",
    "LoadedConfig",
    "PreviewConfig",
    "ModelConfig",
    "Problems",
    "TomlProblem",
    "UIConfig",
    "cache_dir",
    "default_config_path",
    "display_path",
    "format_location",
    "load_config",
    "parse_gguf_threads",
    "parse_toml",
    "printable",
    "printable_json",
    "read_toml",
    "save_settings",
    "shortened",
    "state_dir",
    "data_dir",
    "kv_cache_dir",
    "user_config_dir",
    "user_config_path",
    "write_toml_atomically",
]
