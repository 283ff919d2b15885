"""Remote engines: the same inspection through an OpenAI-compatible server (see `engine.remote.engine`).

The public entry, imported by the CLI and the TUI the way they import `engine.local.client`.
"""

from __future__ import annotations

import os

from engine.remote.engine import RemoteEngine
from engine.remote.http import HttpOptions, normalise_url
from engine.core.settings.sections import EngineConfig

__all__ = ["HttpOptions", "RemoteEngine", "remote_engine"]


def remote_engine(config: EngineConfig) -> RemoteEngine:
    """The engine for [engine] server, its API key read from the variable [engine] api_key_env
    names (read here, at start: the key is never written anywhere). Raises EngineError for a URL
    that is not one."""
    key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    options = HttpOptions(normalise_url(config.server), key.strip(), config.timeout_s, config.turn_timeout_s)
    return RemoteEngine(options, config.tokenizer)
