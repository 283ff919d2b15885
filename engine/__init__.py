"""logitscope's engine: MLX inference behind a small, typed, async API.

Nothing in this package imports Textual. The public surface is `engine.api` (plain data and the
`EngineAPI` protocol) and `engine.client.Engine` (the real implementation); MLX itself is only
imported on the engine thread, so importing this package stays cheap.
"""
