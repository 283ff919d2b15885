"""logitscope's Textual front end. It never imports MLX; it talks to `engine.core.api.EngineAPI`."""
