"""Where logitscope keeps its files: the XDG base directories, each with a `logitscope` folder.

Kept apart from the config code (and free of any other engine import) because the CPU speed
layer needs `cache_dir` for the helpers it compiles, and imports nothing else of the engine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/logitscope``; the XDG spec says to ignore an empty or relative value."""
    return _xdg_dir(env, "XDG_CONFIG_HOME", Path(".config"))


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/logitscope`` (``~/.local/state`` by default): history (recent models, the
    unsent message, rescue files), not settings."""
    return _xdg_dir(env, "XDG_STATE_HOME", Path(".local", "state"))


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/logitscope`` (``~/.cache`` by default): files that can be rebuilt."""
    return _xdg_dir(env, "XDG_CACHE_HOME", Path(".cache"))


def _xdg_dir(env: Mapping[str, str] | None, variable: str, fallback: Path) -> Path:
    """An XDG base directory (an empty or relative value is ignored, as the spec says) / logitscope."""
    env = os.environ if env is None else env
    base = env.get(variable, "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / fallback
    return root / "logitscope"


def kv_cache_dir(env: Mapping[str, str] | None = None) -> str:
    """Where recent histories' KV caches go (`engine.local.kvdisk`): ``$LOGITSCOPE_KV_CACHE`` if set
    ("off" or "0" turns it off, as the tests do), else ``cache_dir() / "kv"``."""
    env = os.environ if env is None else env
    chosen = env.get("LOGITSCOPE_KV_CACHE", "")
    if chosen.lower() in ("off", "0"):
        return ""
    return chosen or str(cache_dir(env) / "kv")


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/logitscope`` (``~/.local/share`` by default): what the user made and keeps
    (the conversation library), unlike the cache (rebuildable) or the state (history)."""
    return _xdg_dir(env, "XDG_DATA_HOME", Path(".local", "share"))
